'use strict';
// Scenario: an ali-ons producer sends an Aliyun timer message
// (setStartDeliverTime: the __STARTDELIVERTIME property, absolute ms) due
// `delayMs` from now, then a plain message. Each send is reported as a `sent`
// event; the timed one carries the delivery time it asked for.
const c = require('./_common');

c.main({ 'delay-ms': { type: 'string', default: '2000' } }, async opts => {
  const producer = await c.startProducer(opts, `PG_${opts.group}`);
  const deliverAt = Date.now() + Number(opts['delay-ms']);
  const timed = new c.Message(opts.topic, 'TagTimer', 'due later');
  timed.setStartDeliverTime(String(deliverAt)); // ali-ons serializes properties as strings
  const first = await producer.send(timed);
  c.emit('sent', { label: 'timed', msgId: first.msgId, deliverAt, sendStatus: first.sendStatus });
  const plain = new c.Message(opts.topic, 'TagPlain', 'right away');
  const second = await producer.send(plain);
  c.emit('sent', { label: 'plain', msgId: second.msgId, sendStatus: second.sendStatus });
  await c.closeQuietly('producer', producer, 5000);
  return { sent: 2 };
});
