'use strict';
// Scenario: broadcasting. Two consumers of one group (isBroadcast, instanceName b1, b2)
// both receive every message.
const c = require('./_common');

c.main({ count: { type: 'string', default: '8' } }, async opts => {
  const count = Number(opts.count);
  const producer = await c.startProducer(opts, `PG_${opts.group}`);
  const consumers = {};
  const recorders = {};
  for (const who of ['b1', 'b2']) {
    consumers[who] = c.newConsumer(opts, who, {
      consumerGroup: opts.group, instanceName: who, isBroadcast: true,
    });
    recorders[who] = c.deliveryRecorder(who);
    consumers[who].subscribe(opts.topic, '*', recorders[who].handler);
    await consumers[who].ready();
  }
  await c.waitAssigned(opts.topic, consumers,
    p => p.b1.length === 4 && p.b2.length === 4, opts.timeoutMs / 3);

  const labels = [];
  for (let i = 0; i < count; i++) {
    labels.push(`bc-${i}`);
    await c.sendMessage(producer, { topic: opts.topic, tags: 'TagBc', label: `bc-${i}` });
  }
  await c.waitFor('every message at both consumers', () => ['b1', 'b2'].every(who => {
    const seen = new Set(recorders[who].deliveries.map(d => d.label));
    return labels.every(label => seen.has(label));
  }), opts.timeoutMs / 3);

  for (const who of ['b1', 'b2']) {
    await c.closeQuietly(who, consumers[who], 5000);
  }
  await c.closeQuietly('producer', producer, 5000);
  return { b1: recorders.b1.deliveries.length, b2: recorders.b2.deliveries.length };
});
