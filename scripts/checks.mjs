// The report both package scripts print (check-package.mjs, check-install.mjs): one `ok`/`FAIL` line
// a check, the problems of a failed one indented under it.

/** Checks named as they are reported; `failures` lists the ones that failed, in order. */
export function checker() {
  const failures = [];
  /** Report `what`: ok when `problems` is empty, else FAIL with each problem. */
  function check(what, problems) {
    if (problems.length === 0) {
      console.log(`ok   ${what}`);
    } else {
      console.log(`FAIL ${what}`);
      for (const problem of problems) console.log(`     ${problem.replaceAll('\n', '\n     ')}`);
      failures.push(what);
    }
  }
  return { check, failures };
}
