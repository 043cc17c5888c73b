'use strict';
// Scenario: retry through %RETRY%<group>, and dead letters.
// --mode first : the handler throws on the first delivery only; ends after the
//                redelivery (reconsumeTimes 1) has been handled.
// --mode always: the handler always throws; runs until the test writes `stop` (the
//                test decides when the message is in %DLQ%<group>).
const c = require('./_common');

c.main({
  mode: { type: 'string', default: 'first' },
  'max-reconsume': { type: 'string', default: '16' },
  key: { type: 'string' },
}, async opts => {
  const maxReconsumeTimes = Number(opts['max-reconsume']);
  const producer = await c.startProducer(opts, `PG_${opts.group}`);
  const consumer = c.newConsumer(opts, 'consumer', { consumerGroup: opts.group, maxReconsumeTimes });
  const recorder = c.deliveryRecorder('consumer', async (msg, fields) => {
    if (opts.mode === 'always' || fields.reconsumeTimes === 0) {
      throw new Error(`interop: failing delivery ${fields.reconsumeTimes} on purpose`);
    }
  });
  consumer.subscribe(opts.topic, '*', recorder.handler);
  await consumer.ready();
  await c.waitAssigned(opts.topic, { consumer }, p => p.consumer.length === 4, 20000);

  await c.sendMessage(producer, {
    topic: opts.topic, tags: 'TagR', label: 'r1', keys: opts.key ? [opts.key] : undefined,
  });
  if (opts.mode === 'first') {
    await c.waitFor('the redelivery', () => recorder.deliveries.some(d => d.reconsumeTimes >= 1),
      opts.timeoutMs - 5000);
  } else {
    const why = await c.stopRequested;
    c.emit('stopping', { why });
  }
  await c.closeQuietly('consumer', consumer, 5000);
  await c.closeQuietly('producer', producer, 5000);
  return { received: recorder.deliveries.length };
});
