'use strict';
// Scenario: a body over 4 KiB (ali-ons deflates it and sets sysflag bit 0) arrives
// byte-identical; keys, user properties and the user flag survive the round trip.
const crypto = require('crypto');
const c = require('./_common');

// 6000 bytes covering every byte value, deterministic.
function bigBody() {
  const parts = [];
  let block = Buffer.from('tidemq interop');
  let size = 0;
  while (size < 6000) {
    block = crypto.createHash('sha256').update(block).digest();
    parts.push(block);
    size += block.length;
  }
  return Buffer.concat(parts).subarray(0, 6000);
}

c.main({}, async opts => {
  const producer = await c.startProducer(opts, `PG_${opts.group}`);
  const consumer = c.newConsumer(opts, 'consumer', { consumerGroup: opts.group });
  const recorder = c.deliveryRecorder('consumer');
  consumer.subscribe(opts.topic, '*', recorder.handler);
  await consumer.ready();
  await c.waitAssigned(opts.topic, { consumer }, p => p.consumer.length === 4, opts.timeoutMs / 3);

  await c.sendMessage(producer, {
    topic: opts.topic, tags: 'TagBig', label: 'big', body: bigBody(),
    keys: ['k1', 'k2'], flag: 7, properties: { custom: 'v', spaced: 'a value with spaces' },
  });
  await c.sendMessage(producer, {
    topic: opts.topic, tags: 'TagSmall', label: 'small', body: 'hello, tidemq',
    keys: ['only'], properties: { custom: 'w' },
  });
  await c.waitFor('both messages', () => {
    const seen = new Set(recorder.deliveries.map(d => d.label));
    return seen.has('big') && seen.has('small');
  }, opts.timeoutMs / 3);

  await c.closeQuietly('consumer', consumer, 5000);
  await c.closeQuietly('producer', producer, 5000);
  return { received: recorder.deliveries.length };
});
