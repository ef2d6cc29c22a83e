/**
 * The house rule "no file over 400 lines" for the code a reader of the package meets: every source
 * file of src/, workers/, examples/, scripts/ and bench/ (specs are exempt). A file past it holds
 * more than one concept and is split along one (STYLE.md).
 */
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const MAX_LINES = 400;
const SOURCE = /\.(ts|mts|cts|js|mjs|cjs)$/;

/** Every source file below `dir` (paths relative to the repository). */
function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && SOURCE.test(entry.name))
    .map((entry) => relative(root, join(entry.parentPath, entry.name)));
}

/** Lines as `wc -l` counts them: newline characters. */
function lineCount(path: string): number {
  return readFileSync(join(root, path), 'utf8').split('\n').length - 1;
}

describe('the source tree', () => {
  it(`has no file over ${MAX_LINES} lines in src/, workers/, examples/, scripts/ or bench/`, () => {
    const files = ['src', 'workers', 'examples', 'scripts', 'bench'].flatMap(sources);
    expect(files.length).toBeGreaterThan(100);
    const over = files.filter((path) => lineCount(path) > MAX_LINES).map((path) => `${path}: ${lineCount(path)} lines`);
    expect(over).toEqual([]);
  });
});
