#!/usr/bin/env node
// The package as users install it: `node scripts/check-package.mjs [--no-build] [--keep]`.
// Builds, `npm pack`s, unpacks the tarball into node_modules/fullstop of a temporary directory
// whose other packages are symlinks to this repository's node_modules (the package's dependencies,
// its peers, @types/node: nothing else, so an undeclared import fails as it would for a user; no
// network), then checks:
//   1. a strict consumer (`skipLibCheck: false`) type-checks an import of every exported subpath,
//      once with module/moduleResolution nodenext and once with esnext + bundler; and consumers
//      that installed only one framework major type-check their use of its subpath: only the MCP
//      SDK v1, only the MCP SDK v2, only `ai` 7 (test/fixtures/consumer/mcp-v1, mcp-v2, ai-v7);
//   2. every subpath loads at run time from an ES module, `require('fullstop')` works from a
//      CommonJS project on this Node, and a TurnPool task runs from the installed package;
//   3. LICENSE (and every file the exports map and `bin` name) is in the tarball;
//   4. every runtime dependency is imported by the packed dist, and everything the packed dist
//      imports is a Node builtin, a dependency or a peer dependency.
// Prints one line per check and every failure, exits 1 if any check failed. Run by .ci/run (and
// scripts/check-install.mjs: the package installed from a fresh clone, a tarball and a git URL).

import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checker } from './checks.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const fixtures = join(root, 'test', 'fixtures', 'consumer');
const args = new Set(process.argv.slice(2));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const { check, failures } = checker();
const began = performance.now();


/** Run a command; its output when it fails, else undefined. */
function run(file, argv, cwd) {
  const result = spawnSync(file, argv, { cwd, encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
  if (result.status === 0) return undefined;
  // Stack frames of a failed node script say nothing about the package: its message does.
  const output = `${result.stdout}${result.stderr}`.split('\n').filter((line) => !/^\s+at /.test(line)).join('\n').trim();
  return `${[file, ...argv].join(' ')} exited ${result.status ?? result.signal}\n${output}`;
}

/** `run`, without blocking: the five type-checks below run at once (one after another they were most of this script's time). */
function runAsync(file, argv, cwd) {
  return new Promise((resolve) => {
    execFile(file, argv, { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, env: { ...process.env, NODE_OPTIONS: '' } }, (error, stdout, stderr) => {
      if (error === null) return resolve(undefined);
      const output = `${stdout}${stderr}`.split('\n').filter((line) => !/^\s+at /.test(line)).join('\n').trim();
      resolve(`${[file, ...argv].join(' ')} exited ${error.code ?? error.signal}\n${output}`);
    });
  });
}

/** The exports map's subpaths as import specifiers: 'fullstop', 'fullstop/worker', … */
const subpaths = Object.keys(pkg.exports).filter((key) => key !== './package.json').map((key) => (key === '.' ? pkg.name : `${pkg.name}/${key.slice(2)}`));

// Build and pack.
if (!args.has('--no-build')) {
  const failed = run('npm', ['run', 'build', '--silent'], root);
  if (failed !== undefined) {
    console.log(`FAIL build\n${failed}`);
    process.exit(1);
  }
}
const work = mkdtempSync(join(tmpdir(), 'fullstop-package-'));
// --ignore-scripts: dist is built above (or by the caller); prepack would build it again. The build
// that prepack runs from a fresh clone is scripts/check-install.mjs's to check.
const [packed] = JSON.parse(execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', work], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }));
const tarball = join(work, packed.filename);
const shipped = new Set(packed.files.map((f) => f.path));
console.log(`     packed ${packed.filename}: ${packed.entryCount} files, ${(packed.size / 1024).toFixed(0)} kB`);

// 3. What must be in the tarball.
{
  const named = [
    'LICENSE', 'package.json', 'README.md',
    ...Object.values(pkg.exports).flatMap((target) => (typeof target === 'string' ? [target] : Object.values(target))),
    ...Object.values(pkg.bin ?? {}),
  ].map((path) => path.replace(/^\.\//, ''));
  check('the tarball holds LICENSE and every file the exports map and bin name', [...new Set(named)].filter((path) => !shipped.has(path)).map((path) => `missing: ${path}`));
}

// Install: unpack as node_modules/fullstop; link what a user's install would bring.
const modules = join(work, 'node_modules');
mkdirSync(modules);
const unpackFailed = run('tar', ['-xzf', tarball, '-C', work]);
if (unpackFailed !== undefined) {
  console.log(`FAIL unpack\n${unpackFailed}`);
  process.exit(1);
}
cpSync(join(work, 'package'), join(modules, pkg.name), { recursive: true });
rmSync(join(work, 'package'), { recursive: true });
const installed = join(modules, pkg.name);
// @types/pg: a TypeScript user of fullstop/postgres has pg's types beside pg (usage.ts passes a pg.Pool).
const linked = [...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.peerDependencies ?? {}), '@types/node', '@types/pg'];
for (const name of linked) {
  mkdirSync(dirname(join(modules, name)), { recursive: true });
  symlinkSync(join(root, 'node_modules', name), join(modules, name), 'dir');
}

// 4. Dependencies against what the packed dist imports.
{
  const imported = new Map(); // package -> a file importing it
  for (const file of filesUnder(join(installed, 'dist'))) {
    if (!/\.(c|m)?js$/.test(file)) continue;
    for (const specifier of bareSpecifiers(readFileSync(file, 'utf8'))) {
      const name = packageName(specifier);
      if (!imported.has(name)) imported.set(name, relative(installed, file));
    }
  }
  const declared = new Set([...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.peerDependencies ?? {})]);
  const builtins = new Set(builtinModules);
  check('every runtime dependency is imported by the packed dist', Object.keys(pkg.dependencies ?? {})
    .filter((name) => !imported.has(name)).map((name) => `${name}: a dependency nothing in dist imports (a devDependency, or gone?)`));
  check('the packed dist imports only builtins, dependencies and peers', [...imported]
    .filter(([name]) => !declared.has(name) && !builtins.has(name) && !name.startsWith('node:'))
    .map(([name, file]) => `${name}: imported by ${file}, not declared in dependencies or peerDependencies`));
}

// 1. Strict consumers, type-checked with this repository's TypeScript (started here, checked below).
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
/** [what, its failure or undefined] of each type-check, in order. */
const typeChecks = [];
{
  const consumer = join(work, 'consumer-types');
  cpSync(join(fixtures, 'types'), consumer, { recursive: true });
  const imports = subpaths.map((s, i) => `import * as m${i} from '${s}';`).join('\n');
  writeFileSync(join(consumer, 'every-subpath.ts'), `${imports}\nexport const modules = [${subpaths.map((_, i) => `m${i}`).join(', ')}];\n`);
  for (const config of ['tsconfig.nodenext.json', 'tsconfig.bundler.json']) {
    typeChecks.push([`a strict consumer type-checks ${subpaths.join(', ')} (${config}, skipLibCheck false)`, runAsync(process.execPath, [tsc, '-p', config], consumer)]);
  }
}

// 1b. Consumers with one framework major only: a node_modules of their own holding a copy of the
// package (not a link: its declarations must resolve nothing from this repository's modules), its
// dependencies, @types/node and the framework packages named (installed name -> this repository's).
{
  const only = [
    ['mcp-v1', 'only @modelcontextprotocol/sdk 1.x', { '@modelcontextprotocol/sdk': '@modelcontextprotocol/sdk', zod: 'zod' }],
    ['mcp-v2', 'only @modelcontextprotocol/server 2.x', { '@modelcontextprotocol/server': '@modelcontextprotocol/server', zod: 'zod' }],
    ['ai-v7', 'only ai 7 (with @ai-sdk/openai 4)', { ai: 'ai-v7', '@ai-sdk/openai': '@ai-sdk/openai-v4', zod: 'zod' }],
  ];
  for (const [fixture, what, frameworks] of only) {
    const consumer = join(work, `consumer-${fixture}`);
    cpSync(join(fixtures, fixture), consumer, { recursive: true });
    const own = join(consumer, 'node_modules');
    cpSync(installed, join(own, pkg.name), { recursive: true });
    const links = { ...Object.fromEntries([...Object.keys(pkg.dependencies ?? {}), '@types/node'].map((n) => [n, n])), ...frameworks };
    for (const [name, source] of Object.entries(links)) {
      mkdirSync(dirname(join(own, name)), { recursive: true });
      symlinkSync(join(root, 'node_modules', source), join(own, name), 'dir');
    }
    typeChecks.push([`a strict consumer with ${what} type-checks its use of ${pkg.name} (skipLibCheck false)`, runAsync(process.execPath, [tsc, '-p', 'tsconfig.json'], consumer)]);
  }
}
for (const [what, failed] of typeChecks) check(what, (await failed) === undefined ? [] : [await failed]);

// 2. At run time: ES module and CommonJS consumers on this Node.
{
  const esm = join(work, 'consumer-esm');
  mkdirSync(esm);
  writeFileSync(join(esm, 'package.json'), '{ "private": true, "type": "module" }\n');
  // Each subpath on its own, so every one that fails is named.
  writeFileSync(join(esm, 'load.js'), [
    `for (const s of ${JSON.stringify(subpaths)}) {`,
    '  try { await import(s); } catch (e) { process.exitCode = 1; console.log(`${s}: ${e.message}`); }',
    '}',
  ].join('\n'));
  const esmFailed = run(process.execPath, ['load.js'], esm);
  check(`every subpath loads from an ES module (node ${process.version})`, esmFailed === undefined ? [] : [esmFailed]);

  const cjs = join(work, 'consumer-cjs');
  cpSync(join(fixtures, 'cjs'), cjs, { recursive: true });
  const cjsFailed = run(process.execPath, ['require.js'], cjs);
  check(`require('${pkg.name}') works from CommonJS and runs a TurnPool task (node ${process.version})`, cjsFailed === undefined ? [] : [cjsFailed]);
}

if (args.has('--keep')) console.log(`     kept ${work}`);
else rmSync(work, { recursive: true, force: true });
if (failures.length > 0) {
  console.log(`${failures.length} check(s) failed (${((performance.now() - began) / 1000).toFixed(1)} s)`);
  process.exit(1);
}
console.log(`the package checks out (${((performance.now() - began) / 1000).toFixed(1)} s)`);

/** Every file under `dir`, recursively. */
function filesUnder(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

/** The bare specifiers (not relative, not absolute) of a compiled module's imports and requires. */
function bareSpecifiers(text) {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"\\])\/\/.*$/gm, '$1');
  const pattern = /\b(?:import|export)\b[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]|\b(?:import|require)\s*\(?\s*['"]([^'"]+)['"]/g;
  return [...code.matchAll(pattern)].map((m) => m[1] ?? m[2]).filter((s) => !s.startsWith('.') && !s.startsWith('/') && !s.startsWith('file:'));
}

/** 'piscina/dist/x' -> 'piscina', '@scope/name/sub' -> '@scope/name', 'node:fs' -> 'node:fs'. */
function packageName(specifier) {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}
