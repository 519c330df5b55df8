// graphile-worker's runner: one no-op task; concurrency and pollInterval from argv.
// LISTEN/NOTIFY is how graphile-worker learns of new jobs; the poll is its fallback.
const fs = require("fs");
const { run, Logger } = require("graphile-worker");

// Warnings and errors only, as the Python peers run: a line per job costs time.
const logger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") console.error(`${level}: ${message}`);
});

async function main() {
  const [connectionString, concurrency, pollInterval] = process.argv.slice(2);
  const latencyFile = process.env.PEER_LATENCY_FILE;
  const runner = await run({
    connectionString,
    concurrency: Number(concurrency),
    pollInterval: Number(pollInterval),
    noHandleSignals: false,
    logger,
    taskList: {
      noop: async (payload) => {
        if (latencyFile) fs.appendFileSync(latencyFile, `${payload.n} ${Date.now() / 1000}\n`);
      },
    },
  });
  await runner.promise;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
