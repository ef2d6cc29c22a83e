import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Tests start worker threads and process trees; forks keep each file's process (and its
    // leak checks on /proc/self) to itself.
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
