// kafkajs (the Node.js client, unmodified) over a SASL listener: its own PLAIN and SCRAM code, over TLS when a CA
// file is given. Produces records one at a time for a while (longer than the broker's connections.max.reauth.ms,
// so that kafkajs re-authenticates its open connections), reads them back in a group, and tries a wrong password.
// Arguments: bootstrap, mechanism (plain, scram-sha-256, scram-sha-512), user, password, CA file or '-',
// records, milliseconds between records. Prints one JSON object of what it saw (tests/kafkajs.py runs it).
const fs = require('fs');
const { Kafka, logLevel } = require(process.env.KAFKAJS);

const [bootstrap, mechanism, username, password, ca, count, gap] = process.argv.slice(2);
const ssl = ca === '-' ? false : { ca: [fs.readFileSync(ca, 'utf-8')], rejectUnauthorized: true };
const suffix = Math.random().toString(16).slice(2, 8);
const topic = `kafkajs-sasl-${suffix}`, group = `kafkajs-sasl-group-${suffix}`;
const result = {};

function client(secret) {
  // (re-authenticating a second before the session's end, where kafkajs's default is ten)
  return new Kafka({ clientId: 'kbroker-kafkajs-sasl', brokers: [bootstrap], logLevel: logLevel.NOTHING, ssl,
                     sasl: { mechanism, username, password: secret }, reauthenticationThreshold: 1000,
                     retry: { retries: 2, initialRetryTime: 100 } });
}

(async () => {
  const kafka = client(password);
  const admin = kafka.admin();
  await admin.connect();
  result.created = await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true });

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const values = Array.from({ length: Number(count) }, (_, i) => `s${i}`);
  for (const value of values) {
    await producer.send({ topic, acks: -1, messages: [{ key: value, value }] });
    await new Promise(resolve => setTimeout(resolve, Number(gap)));
  }
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: 200 });
  const seen = new Set();
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({ eachMessage: async ({ message }) => { seen.add(message.value.toString()); } });
  const began = Date.now();
  while (seen.size < values.length && Date.now() - began < 30000) await new Promise(r => setTimeout(r, 20));
  await consumer.disconnect();
  result.read = seen.size;
  result.committed = (await admin.fetchOffsets({ groupId: group, topics: [topic] }))[0].partitions
    .map(p => Number(p.offset)).reduce((a, b) => a + b, 0);
  await admin.deleteTopics({ topics: [topic] });
  await admin.disconnect();

  const wrong = client(`${password}-wrong`).admin();
  try {
    await wrong.connect();
    result.wrongPassword = 'accepted';
    await wrong.disconnect();
  } catch (e) {
    result.wrongPassword = e.name;
  }
  console.log(JSON.stringify(result));
})().catch(e => { console.error(e.stack || e); process.exit(1); });
