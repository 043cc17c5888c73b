'use strict';
// Scenario: an ali-ons consumer keeps consuming from the slave while the master is down.
// --phase send    : --count labelled messages `m-0`.. are sent (to the master).
// --phase consume : a consumer of --group (small pulls, so most of the backlog is still
//                   on the broker) consumes until it has --pause-after messages, emits
//                   `paused` and blocks its handler until the test writes `stop` (the
//                   test kills the master meanwhile); then it must get every label.
const c = require('./_common');

c.main({
  phase: { type: 'string' },
  count: { type: 'string', default: '80' },
  'pause-after': { type: 'string', default: '10' },
}, async opts => {
  const count = Number(opts.count);
  const labels = [];
  for (let i = 0; i < count; i++) {
    labels.push(`m-${i}`);
  }
  if (opts.phase === 'send') {
    const producer = await c.startProducer(opts, `PG_${opts.group}`);
    for (const label of labels) {
      await c.sendMessage(producer, { topic: opts.topic, tags: 'TagS', label });
    }
    await c.closeQuietly('producer', producer, 5000);
    return { sent: count };
  }

  const pauseAfter = Number(opts['pause-after']);
  let paused = false;
  // Every handler call from the pause on waits: no queue consumes further.
  const recorder = c.deliveryRecorder('consumer', async () => {
    if (recorder.deliveries.length >= pauseAfter) {
      if (!paused) {
        paused = true;
        c.emit('paused', { received: recorder.deliveries.length });
      }
      await c.stopRequested;
    }
  });
  const consumer = c.newConsumer(opts, 'consumer', {
    consumerGroup: opts.group,
    pullBatchSize: 2,
    pullThresholdForQueue: 2,
  });
  consumer.subscribe(opts.topic, '*', recorder.handler);
  await consumer.ready();
  await c.waitFor(`the ${count} messages`, () => {
    const seen = new Set(recorder.deliveries.map(d => d.label));
    return labels.every(label => seen.has(label));
  }, opts.timeoutMs * 0.8);
  await c.closeQuietly('consumer', consumer, 5000);
  return { received: recorder.deliveries.length };
});
