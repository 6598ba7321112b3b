// A scripts/run.ts for the seed's run_code skill, written for the tests: it reads the
// input ({language, code, timeout}) as JSON on stdin, runs the code with python3, node or
// bash and prints {success, output, error, exitCode, language}. It uses no type syntax,
// so node runs it as it is (the tests name /usr/bin/node as the `ts` runner: no
// TypeScript compiler is installed here).
const { spawnSync } = require("child_process");

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const args = JSON.parse(input || "{}");
  const programs = {
    python: ["python3", ["-c", args.code]],
    javascript: ["node", ["-e", args.code]],
    bash: ["bash", ["-c", args.code]],
  };
  const chosen = programs[args.language];
  if (!chosen) {
    console.log(JSON.stringify({ success: false, error: "unknown language " + args.language }));
    process.exitCode = 2;
    return;
  }
  const timeout = Math.min(Number(args.timeout) || 60000, 120000);
  const r = spawnSync(chosen[0], chosen[1], { encoding: "utf8", timeout });
  console.log(
    JSON.stringify({
      success: r.status === 0,
      output: r.stdout || "",
      error: r.stderr || (r.error ? String(r.error) : ""),
      exitCode: r.status === null ? -1 : r.status,
      language: args.language,
    }),
  );
});
