import { defineConfig } from 'vitest/config';

// `npm run test:e2e`: the browser tests (Debian's Chromium driven by playwright-core).
export default defineConfig({
  test: {
    include: ['test/e2e/**/*.e2e.test.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
