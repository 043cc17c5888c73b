'use strict';
// Scenario: sending to a topic the name server does not know is rejected by ali-ons
// with MQClientException code 17 (TOPIC_NOT_EXIST), protocol-remoting.md §3.3.
const c = require('./_common');

c.main({}, async opts => {
  const producer = await c.startProducer(opts, `PG_${opts.group}`);
  const started = Date.now();
  try {
    const result = await producer.send(new c.Message(opts.topic, 'TagA', 'to nowhere'));
    c.emit('sent', { sendStatus: result.sendStatus, msgId: result.msgId, elapsedMs: Date.now() - started });
  } catch (err) {
    c.emit('send_error', { name: err.name, code: err.code, message: err.message, elapsedMs: Date.now() - started });
  }
  await c.closeQuietly('producer', producer, 5000);
  return {};
});
