'use strict';
// Scenario: a restarted consumer resumes from its committed offset.
// --phase first : consumer of --group starts, --count messages are sent and consumed,
//                 the consumer closes (committing its offsets).
// --phase second: --count messages are sent while no consumer runs, then a new
//                 consumer of the same group starts and must get exactly those.
const c = require('./_common');

c.main({
  phase: { type: 'string' },
  count: { type: 'string', default: '4' },
}, async opts => {
  const count = Number(opts.count);
  const prefix = opts.phase === 'first' ? 'first' : 'second';
  const producer = await c.startProducer(opts, `PG_${opts.group}`);
  const labels = [];
  for (let i = 0; i < count; i++) {
    labels.push(`${prefix}-${i}`);
  }
  const sendAll = async () => {
    for (const label of labels) {
      await c.sendMessage(producer, { topic: opts.topic, tags: 'TagO', label });
    }
  };

  if (opts.phase === 'second') {
    await sendAll();
  }
  const consumer = c.newConsumer(opts, 'consumer', { consumerGroup: opts.group });
  const recorder = c.deliveryRecorder('consumer');
  consumer.subscribe(opts.topic, '*', recorder.handler);
  await consumer.ready();
  await c.waitAssigned(opts.topic, { consumer }, p => p.consumer.length === 4, opts.timeoutMs / 3);
  if (opts.phase === 'first') {
    await sendAll();
  }
  await c.waitFor(`the ${count} messages of phase ${opts.phase}`, () => {
    const seen = new Set(recorder.deliveries.map(d => d.label));
    return labels.every(label => seen.has(label));
  }, opts.timeoutMs / 3);

  await c.closeQuietly('consumer', consumer, 5000);
  await c.closeQuietly('producer', producer, 5000);
  return { received: recorder.deliveries.length };
});
