// kafkajs's idempotent acks=all producer and a group consumer across kill -9 of a partition leader: the producer
// sends 3,000 records in sends of 250 to a topic of one partition; after the first 1,000 it prints "killing" and
// keeps sending while the test kills the partition's leader (and starts it again). Then a consumer group reads until it has every
// acknowledged record. Prints one JSON object: how many were acknowledged, read, and acknowledged but not read.
const { Kafka, logLevel } = require(process.env.KAFKAJS);

const [bootstrap, topic] = process.argv.slice(2);
const kafka = new Kafka({ clientId: 'kbroker-kafkajs-failover', brokers: bootstrap.split(','),
                          logLevel: logLevel.NOTHING, retry: { retries: 20, initialRetryTime: 200 } });

(async () => {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const acked = new Set();
  for (let first = 0; first < 3000; first += 250) {
    if (first === 1000) console.log('killing');
    const values = Array.from({ length: 250 }, (_, i) => String(first + i).padStart(6, '0'));
    try {
      await producer.send({ topic, acks: -1, timeout: 30000, messages: values.map(value => ({ value })) });
      values.forEach(v => acked.add(v));
    } catch (e) {
      console.error(`a send of 250 failed beyond the retries: ${e.message}`);
    }
  }
  await producer.disconnect();

  const received = new Set();
  const consumer = kafka.consumer({ groupId: `kafkajs-${topic}`, maxWaitTimeInMs: 200, heartbeatInterval: 300 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({ eachMessage: async ({ message }) => { received.add(message.value.toString()); } });
  const began = Date.now();
  while ([...acked].some(v => !received.has(v)) && Date.now() - began < 90000) {
    await new Promise(resolve => setTimeout(resolve, 100));
  }
  await consumer.disconnect();
  const missing = [...acked].filter(v => !received.has(v));
  console.log(JSON.stringify({ acked: acked.size, received: received.size, missing: missing.length }));
})().catch(e => { console.error(e.stack || e); process.exit(1); });
