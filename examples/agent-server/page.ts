/**
 * The page's files (public/: HTML, CSS and one script, no build step), read from disk on every
 * request so an edit shows on reload. Only these names are served: no path from a URL ever
 * reaches the file system.
 */
import type { ServerResponse } from 'node:http';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { only } from './http.js';

const FILES: Record<string, [file: string, type: string]> = {
  '/': ['index.html', 'text/html; charset=utf-8'],
  '/index.html': ['index.html', 'text/html; charset=utf-8'],
  '/app.js': ['app.js', 'text/javascript; charset=utf-8'],
  '/style.css': ['style.css', 'text/css; charset=utf-8'],
};

/** Serves `path` if it is one of the page's files; false (nothing sent) otherwise. */
export async function servePage(publicDir: string, method: string, path: string, res: ServerResponse): Promise<boolean> {
  const entry = FILES[path];
  if (entry === undefined) return false;
  only(method, 'GET', path);
  const [file, type] = entry;
  const body = await readFile(join(publicDir, file));
  res.writeHead(200, { 'content-type': type, 'content-length': body.length, 'cache-control': 'no-store' });
  res.end(body);
  return true;
}
