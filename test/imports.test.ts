/**
 * Imports run one way: no module of src/ or workers/ imports itself back through others
 * (scripts/check-cycles.mjs). The checker is also run on planted fixtures, so this test can fail.
 * And what the package exposes: the public declarations hide the internals (module-private state
 * and hooks modules no package entry exports; no `@internal` tag, no `stripInternal`).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const checker = join(root, 'scripts', 'check-cycles.mjs');
const temps: string[] = [];

afterAll(() => {
  for (const dir of temps.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function check(cwd: string, ...dirs: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [checker, ...dirs], { cwd }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : (error.code as number), stdout, stderr });
    });
  });
}

/** A temp dir holding `files` (path -> text). */
function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'fullstop-cycles-'));
  temps.push(dir);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

describe('the import graph of src/ and workers/', () => {
  it('has no cycle', async () => {
    const result = await check(root);
    expect(result.stdout).not.toMatch(/^cycle:/m);
    expect(result.stdout).toMatch(/^\d+ files, 0 import cycles$/m);
    expect(result.code).toBe(0);
  });
});

describe('check-cycles', () => {
  it('finds a planted three-module cycle through a type-only import and a re-export, and exits 1', async () => {
    const dir = tree({
      'src/a.ts': "import { b } from './b.js';\nexport const a = b + 1;\n",
      'src/b.ts': "export { c as b } from './deep/c.js';\n",
      'src/deep/c.ts': "import type { A } from '../a.js';\nexport const c = 1;\nexport type C = A;\n",
      'workers/w.cts': "import { a } from '../src/a.js';\nexport const w = a;\n",
    });
    const result = await check(dir, 'src', 'workers');
    expect(result.stdout).toContain('cycle: src/a.ts -> src/b.ts -> src/deep/c.ts -> src/a.ts');
    expect(result.stdout).toMatch(/^4 files, 1 import cycle$/m);
    expect(result.code).toBe(1);
  });

  it('finds a cycle between a .cts file (through require) and a .ts file', async () => {
    const dir = tree({
      'workers/entry.cts': "const { y } = require('./y.js');\nexport = y;\n",
      'workers/y.ts': "import type {} from './entry.cjs';\nexport const y = 1;\n",
    });
    const result = await check(dir, 'workers');
    expect(result.stdout).toContain('cycle: workers/entry.cts -> workers/y.ts -> workers/entry.cts');
    expect(result.code).toBe(1);
  });

  it('ignores imports in comments, packages and files outside the tree', async () => {
    const dir = tree({
      'src/a.ts': "// import { b } from './b.js';\n/* export * from './b.js' */\nimport { x } from 'node:fs';\nexport const a = 1;\n",
      'src/b.ts': "import { a } from './a.js';\nexport const b = a;\n",
    });
    const result = await check(dir, 'src');
    expect(result.stdout).toMatch(/^2 files, 0 import cycles$/m);
    expect(result.code).toBe(0);
  });

  it('exits 2 for a directory that does not exist', async () => {
    const result = await check(tree({}), 'nowhere');
    expect(result.stderr).toContain('not a directory: nowhere');
    expect(result.code).toBe(2);
  });
});

describe('the public declarations of the token modules', () => {
  /** The declarations of one .d.ts, comments left out (they may name internals). */
  const declarations = (path: string) =>
    readFileSync(join(root, 'dist', 'src', path), 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');

  /** The body of `export declare class <name> { … }` in `text`. */
  const classBody = (text: string, name: string) => {
    const start = text.indexOf(`export declare class ${name}`);
    expect(start, name).toBeGreaterThanOrEqual(0);
    return text.slice(start, text.indexOf('\n}', start));
  };

  it('hide the engine: CancelToken and TurnRegistry declare no engine member, the index names no helper', () => {
    const token = classBody(declarations('token/token.d.ts'), 'CancelToken');
    for (const internal of ['STATE', 'SLOT', 'TokenState', 'wrap(', 'isCancelToken']) expect(token, internal).not.toContain(internal);
    const registry = classBody(declarations('token/registry.d.ts'), 'TurnRegistry');
    expect(registry).not.toMatch(/TokenState|TokenHost|SlabSet/);
    const index = declarations('index.d.ts');
    for (const internal of ['tokenState', 'wrap', 'isCancelToken', 'setDefaultRegistry', 'runnerHooks', 'ledgerHooks']) {
      expect(index, internal).not.toMatch(new RegExp(`\\b${internal}\\b`));
    }
  });

  it('keep every public name of the index', () => {
    const index = declarations('index.d.ts');
    for (const name of ['CancelToken', 'TurnRegistry', 'turns', 'runInTurn', 'runInSession', 'activeToken', 'checkCancelled',
      'CancelledError', 'isCancelledError', 'ToolError', 'FatalToolError', 'TokenHandle']) {
      expect(index, name).toMatch(new RegExp(`\\b${name}\\b`));
    }
  });
});
