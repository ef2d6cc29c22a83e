import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The browser tests run under `npm run test:e2e` (vitest.e2e.config.ts).
    exclude: [...configDefaults.exclude, 'test/e2e/**'],
    // Tests start worker threads and process trees; forks keep each file's process (and its
    // leak checks on /proc/self) to itself.
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
