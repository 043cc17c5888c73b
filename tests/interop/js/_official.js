'use strict';
// Shared plumbing for the official Node client scripts (official_node*.js):
// string options from argv (always --endpoints, --topic, --group, --timeout-ms),
// JSON-line events on stdout, and the hard timeout (exit 3, a `timeout` event).
const { parseArgs } = require('util');

function emit(event, fields) {
  process.stdout.write(JSON.stringify(Object.assign({ event, t: Date.now() }, fields || {})) + '\n');
}

// The options named in `extra` (besides the common ones), parsed, with the timeout armed.
function start(extra) {
  const options = {
    endpoints: { type: 'string' },
    topic: { type: 'string' },
    group: { type: 'string' },
    'timeout-ms': { type: 'string', default: '90000' },
  };
  for (const name of extra || []) options[name] = { type: 'string' };
  const { values: opts } = parseArgs({ options });
  setTimeout(() => { emit('timeout'); process.exit(3); }, Number(opts['timeout-ms'])).unref();
  return opts;
}

module.exports = { emit, start };
