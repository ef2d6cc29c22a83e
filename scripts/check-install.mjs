#!/usr/bin/env node
// The package installed the ways users install it, from a fresh clone:
//   node scripts/check-install.mjs [--ref COMMIT] [--keep]
//   1. `git clone` of this repository at COMMIT (default HEAD: committed work only), no dist/; its node_modules is a link
//      to this repository's (the devDependencies the lock file pins: the step under test is the
//      build, not npm's download). `npm pack` there must build (prepack) and ship dist/.
//   2. Into empty projects, on Node 20 (this Node) and on Node 24 (runtimes/node_modules/node-v24, the
//      whole install under it: npm, the git dependency's install and its `prepare`): the tarball
//      (`--ignore-scripts`: the tarball has nothing to run) and the clone as a `git+file://` URL
//      (npm installs its devDependencies and runs `prepare`, which builds). All four at once, with
//      npm's cache and --prefer-offline.
//   3. In each project, on its Node: every subpath imports (the optional peers linked from this
//      repository's node_modules, as check-package does), the docs' relative links resolve in the
//      installed package, and one turn runs a subprocess and is stopped: cancelled, the child gone.
// Prints one line per check and every failure; exits 1 if any failed. Run by .ci/run.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, normalize, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checker } from './checks.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const keep = process.argv.includes('--keep');
const ref = process.argv.includes('--ref') ? process.argv[process.argv.indexOf('--ref') + 1] : 'HEAD';
const began = performance.now();
const { check, failures } = checker();
/** How long one npm command may take: a git install builds the package (tsc) on a loaded machine. */
const NPM_LIMIT_MS = 600_000;
/** How long the import-and-stop script may take (it stops its turn within a second). */
const SMOKE_LIMIT_MS = 60_000;

const NODES = [
  { name: 'node 20', bin: process.execPath, major: 20 },
  { name: 'node 24', bin: join(root, 'runtimes/node_modules/node-v24/bin/node'), major: 24 },
];


/** Run a command; resolves with its output when it fails, else undefined. PATH starts with `node`'s directory. */
function run(file, argv, cwd, { node = process.execPath, limitMs = NPM_LIMIT_MS } = {}) {
  return new Promise((resolveRun) => {
    const env = { ...process.env, NODE_OPTIONS: '', PATH: `${dirname(node)}:${process.env.PATH}` };
    const child = spawn(file, argv, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c) => { output += c; });
    child.stderr.on('data', (c) => { output += c; });
    const timer = setTimeout(() => { output += `\nkilled after ${limitMs} ms`; child.kill('SIGKILL'); }, limitMs);
    // A binary that cannot be spawned (a runtime removed under us) is a failed check, not a crash.
    child.once('error', (error) => { clearTimeout(timer); resolveRun(`${[file, ...argv].join(' ')} could not run: ${error.message}`); });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      // Stack frames of a failed node script say nothing about the package: its message does.
      const text = output.split('\n').filter((line) => !/^\s+at /.test(line)).join('\n').trim();
      resolveRun(code === 0 ? undefined : `${[file, ...argv].join(' ')} exited ${code ?? signal}\n${text.slice(-4000)}`);
    });
  });
}

/** npm's own CLI script, so it can be run by another Node binary. */
function npmCli() {
  const which = spawnSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).stdout.trim();
  return realpathSync(which);
}

/** The subpaths of the exports map as import specifiers: 'fullstop', 'fullstop/worker', … */
const subpaths = Object.keys(pkg.exports).filter((key) => key !== './package.json').map((key) => (key === '.' ? pkg.name : `${pkg.name}/${key.slice(2)}`));

/** The script each project runs: import every subpath, then one turn whose subprocess a stop ends. */
const SMOKE = `
import { existsSync } from 'node:fs';
const failed = [];
for (const s of ${JSON.stringify(subpaths)}) {
  try { await import(s); } catch (e) { failed.push(\`import \${s}: \${e.message}\`); }
}
const { TurnRunner, exec } = await import('fullstop');
const runner = new TurnRunner({ graceMs: 100 });
let running;
const ready = new Promise((r) => { running = r; });
let child;
const outcome = runner.run('s', (turn) => turn.tool('sleep', {}, async (token) => {
  child = await exec('sh', ['-c', 'echo ready; exec sleep 30'], { token, onOutput: ({ text }) => { if (text.includes('ready')) running(); } });
  return child;
}), { turnId: 't1' });
await ready;
const report = await runner.stop('s');
const { status } = await outcome;
if (status !== 'cancelled') failed.push(\`the turn ended \${status}, not cancelled\`);
if (report?.turnId !== 't1') failed.push(\`stop answered \${JSON.stringify(report)}\`);
if (child === undefined || !child.cancelled) failed.push(\`exec returned \${JSON.stringify(child)}\`);
else if (existsSync(\`/proc/\${child.pid}\`)) failed.push(\`the child \${child.pid} is still alive\`);
if (failed.length > 0) { console.log(failed.join('\\n')); process.exit(1); }
console.log(\`\${process.version}: ${subpaths.length} subpaths imported, turn \${status}\`);
`;

/** Every relative link of the installed package's Markdown that does not resolve inside it. */
function brokenLinks(installed) {
  const broken = [];
  const markdown = filesUnder(installed).filter((f) => f.endsWith('.md'));
  for (const file of markdown) {
    // Code spans and blocks are not links.
    const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
    for (const m of text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)|\bsrc="([^"]+)"/g)) {
      const target = (m[1] ?? m[2]).split('#')[0];
      if (target === '' || /^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      const path = normalize(join(dirname(file), target));
      if (!existsSync(path)) broken.push(`${relative(installed, file)} links to ${target}: not in the package`);
    }
  }
  return broken;
}

function filesUnder(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? (name === 'node_modules' ? [] : filesUnder(path)) : [path];
  });
}

/** An empty ES module project with `spec` installed by `node`'s npm, the optional peers linked. */
async function install(dir, spec, node, extra) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), '{ "private": true, "type": "module" }\n');
  const failed = await run(node.bin, [npmCli(), 'install', spec, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', ...extra], dir, { node: node.bin });
  if (failed !== undefined) return [failed];
  for (const name of Object.keys(pkg.peerDependencies ?? {})) {
    const link = join(dir, 'node_modules', name);
    if (existsSync(link)) continue;
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(join(root, 'node_modules', name), link, 'dir');
  }
  return [];
}

const work = mkdtempSync(join(tmpdir(), 'fullstop-install-'));
try {
  // 1. A fresh clone, packed without building first.
  const clone = join(work, 'clone');
  const cloned = await run('git', ['clone', '--quiet', root, clone], work);
  if (cloned !== undefined) throw new Error(cloned);
  const checkedOut = ref === 'HEAD' ? undefined : await run('git', ['checkout', '--quiet', '--detach', ref], clone);
  if (checkedOut !== undefined) throw new Error(checkedOut);
  symlinkSync(join(root, 'node_modules'), join(clone, 'node_modules'), 'dir');
  check('the fresh clone has no dist/', existsSync(join(clone, 'dist')) ? ['dist/ is committed'] : []);
  const packed = spawnSync('npm', ['pack', '--json', '--pack-destination', work, '--loglevel=error'], { cwd: clone, encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
  if (packed.status !== 0) throw new Error(`npm pack in the clone exited ${packed.status}\n${packed.stderr}`);
  const [info] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('[')));
  const shipped = new Set(info.files.map((f) => f.path));
  const targets = Object.values(pkg.exports).flatMap((t) => (typeof t === 'string' ? [t] : Object.values(t))).map((p) => p.replace(/^\.\//, ''));
  check(`npm pack in a fresh clone builds first: ${info.entryCount} files, every export target among them`, targets.filter((p) => p !== 'package.json' && !shipped.has(p)).map((p) => `missing: ${p}`));
  const tarball = join(work, info.filename);

  // 2. The four installs at once.
  const nodes = NODES.filter((node) => {
    const version = spawnSync(node.bin, ['--version'], { encoding: 'utf8' }).stdout?.trim() ?? '';
    if (version.startsWith(`v${node.major}.`)) return true;
    check(`${node.name} is at ${node.bin}`, [`found ${JSON.stringify(version)}: run node scripts/test-runtimes.mjs --ensure`]);
    return false;
  });
  const projects = nodes.flatMap((node) => [
    { node, how: 'the tarball', dir: join(work, `tarball-${node.major}`), spec: tarball, extra: ['--ignore-scripts'] },
    { node, how: 'a git+file:// URL', dir: join(work, `git-${node.major}`), spec: `git+file://${clone}`, extra: [] },
  ]);
  const t0 = performance.now();
  const installed = await Promise.all(projects.map((p) => install(p.dir, p.spec, p.node, p.extra)));
  console.log(`     installed ${projects.length} projects in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  // 3. Each project on its Node.
  for (const [i, p] of projects.entries()) {
    check(`${p.how} installs into an empty project (${p.node.name})`, installed[i]);
    if (installed[i].length > 0) continue;
    check(`the docs' relative links resolve in the package installed from ${p.how} (${p.node.name})`, brokenLinks(join(p.dir, 'node_modules', pkg.name)));
    writeFileSync(join(p.dir, 'smoke.js'), SMOKE);
    const failed = await run(p.node.bin, ['smoke.js'], p.dir, { node: p.node.bin, limitMs: SMOKE_LIMIT_MS });
    check(`from ${p.how} (${p.node.name}): every subpath imports, a turn's subprocess is stopped`, failed === undefined ? [] : [failed]);
  }
} catch (error) {
  check('the clone is packed', [String(error?.message ?? error)]);
} finally {
  if (keep) console.log(`     kept ${work}`);
  else rmSync(work, { recursive: true, force: true });
}
const took = `${((performance.now() - began) / 1000).toFixed(1)} s`;
if (failures.length > 0) {
  console.log(`${failures.length} check(s) failed (${took})`);
  process.exit(1);
}
console.log(`the package installs (${took})`);
