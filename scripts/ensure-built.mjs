// Build once if dist/ is missing or older than the sources: `npm start`/`npm run serve` on a fresh
// clone, and the package's `prepare` (npm ci in the repo, a git URL install, where npm runs it twice).
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const newest = (dir) => {
  let t = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    t = Math.max(t, entry.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
};
const marker = join(root, 'dist/examples/demo.js');
const sources = Math.max(...['src', 'workers', 'examples', 'bench'].map((d) => newest(join(root, d))));
if (!existsSync(marker) || statSync(marker).mtimeMs < sources) {
  execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.json')], { stdio: 'inherit' });
}
