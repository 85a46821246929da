/**
 * The prober of scenario 10 in a process of its own: `/health` every 20 ms and a built-in chat
 * every tenth probe, until SIGTERM, then one JSON line of the latencies. Apart from the uploads'
 * client, so sending 50 MB does not delay the prober's own clock.
 */
const url = process.argv[2];
if (!url) throw new Error('usage: health-prober URL');
const health: number[] = [];
const chats: number[] = [];
let running = true;
process.on('SIGTERM', () => {
  running = false;
});

async function probe(): Promise<void> {
  let probes = 0;
  // One untimed request first: the first fetch of a process loads and compiles its HTTP client
  // (~30 ms of this process's CPU), which is not the server's latency.
  await (await fetch(`${url}/health`)).arrayBuffer();
  console.log('{"ready":true}');
  while (running) {
    const asked = performance.now();
    await (await fetch(`${url}/health`)).arrayBuffer();
    health.push(performance.now() - asked);
    probes += 1;
    if (probes % 10 === 0) {
      const chatAsked = performance.now();
      const chat = await fetch(`${url}/api/chat/`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ message: 'still answering?' }),
      });
      await chat.arrayBuffer();
      chats.push(performance.now() - chatAsked);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  process.stdout.write(`${JSON.stringify({ health, chats })}\n`, () => process.exit(0));
}

probe().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
