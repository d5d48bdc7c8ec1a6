// kafkajs (the Node.js client, unmodified) against one broker: admin requests, idempotent and gzip produce,
// a classic consumer group of two members sharing a topic, and transactions with a group's offsets.
// Prints one JSON object of what it saw (tests/kafkajs.py runs it).
const { Kafka, CompressionTypes, logLevel } = require(process.env.KAFKAJS);

const kafka = new Kafka({ clientId: 'kbroker-kafkajs', brokers: [process.argv[2]], logLevel: logLevel.ERROR,
                          retry: { retries: 8, initialRetryTime: 100 } });
const suffix = Math.random().toString(16).slice(2, 8);
const topic = `kafkajs-${suffix}`, out = `kafkajs-out-${suffix}`, group = `kafkajs-group-${suffix}`;
const result = {};

function until(ready, what, ms = 30000) {
  return new Promise((resolve, reject) => {
    const began = Date.now();
    const timer = setInterval(() => {
      if (ready()) { clearInterval(timer); resolve(); }
      else if (Date.now() - began > ms) { clearInterval(timer); reject(new Error(`timed out: ${what}`)); }
    }, 20);
  });
}

async function members(groupId, topics, count) {
  // `count` consumers of one group, running; each one's latest assignment and the records it read
  // (a short fetch wait: kafkajs heartbeats, and leaves, between fetches)
  const consumers = Array.from({ length: count },
                               () => kafka.consumer({ groupId, maxWaitTimeInMs: 200, heartbeatInterval: 300 }));
  const assigned = consumers.map(() => null), seen = consumers.map(() => []);
  for (const [i, consumer] of consumers.entries()) {
    consumer.on(consumer.events.GROUP_JOIN, e => {
      assigned[i] = Object.values(e.payload.memberAssignment).flat();
    });
    await consumer.connect();
    for (const t of topics) await consumer.subscribe({ topic: t, fromBeginning: true });
    await consumer.run({ eachMessage: async ({ message }) => { seen[i].push(message.value.toString()); } });
  }
  return { consumers, assigned, seen };
}

(async () => {
  const admin = kafka.admin();
  await admin.connect();
  result.created = await admin.createTopics({ topics: [{ topic, numPartitions: 3 }, { topic: out, numPartitions: 1 }],
                                              waitForLeaders: true });
  result.partitions = (await admin.fetchTopicMetadata({ topics: [topic] })).topics[0].partitions.length;
  result.brokers = (await admin.describeCluster()).brokers.length;

  // two members share the three partitions before anything is written
  const pair = await members(group, [topic], 2);
  await until(() => pair.assigned.every(a => a && a.length) &&
                    new Set(pair.assigned.flat()).size === 3 && pair.assigned.flat().length === 3,
              'two members sharing three partitions');
  result.assigned = pair.assigned.map(a => [...a].sort());

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const values = Array.from({ length: 300 }, (_, i) => `v${i}`);
  for (const [i, codec] of [CompressionTypes.None, CompressionTypes.GZIP, CompressionTypes.None].entries()) {
    await producer.send({ topic, compression: codec, acks: -1,
                          messages: values.slice(i * 100, i * 100 + 100).map((value, j) => ({ key: `k${j}`, value })),
                        });
  }
  await producer.disconnect();
  result.endOffsets = (await admin.fetchTopicOffsets(topic)).map(p => Number(p.high)).reduce((a, b) => a + b, 0);

  await until(() => new Set(pair.seen.flat()).size === 300, 'the two members reading 300 records');
  result.read = new Set(pair.seen.flat()).size;
  result.readByEach = pair.seen.map(s => s.length > 0);
  await Promise.all(pair.consumers.map(c => c.disconnect()));
  const committed = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  result.committed = committed[0].partitions.map(p => Number(p.offset)).reduce((a, b) => a + b, 0);
  result.listed = (await admin.listGroups()).groups.some(g => g.groupId === group);
  result.state = (await admin.describeGroups([group])).groups[0].state;

  // transactions: one committed with a group's offsets, one aborted, one committed; read_committed (kafkajs's
  // default) sees the committed records only
  const txn = kafka.producer({ transactionalId: `kafkajs-txn-${suffix}`, idempotent: true, maxInFlightRequests: 1 });
  await txn.connect();
  let t = await txn.transaction();
  await t.send({ topic: out, messages: [{ value: 'committed-1' }, { value: 'committed-2' }] });
  await t.sendOffsets({ consumerGroupId: `${group}-eos`,
                        topics: [{ topic, partitions: [{ partition: 0, offset: '5' }] }] });
  await t.commit();
  t = await txn.transaction();
  await t.send({ topic: out, messages: [{ value: 'aborted' }] });
  await t.abort();
  t = await txn.transaction();
  await t.send({ topic: out, messages: [{ value: 'committed-3' }] });
  await t.commit();
  await txn.disconnect();
  const eos = await admin.fetchOffsets({ groupId: `${group}-eos`, topics: [topic] });
  result.transactionalOffset = Number(eos[0].partitions.find(p => p.partition === 0).offset);
  const reader = await members(`${group}-reader`, [out], 1);
  // (the aborted record lies between the second and the third: seen, it would come before the third)
  await until(() => reader.seen[0].includes('committed-3'), 'the third committed record');
  result.transactional = reader.seen[0];
  await reader.consumers[0].disconnect();

  await admin.deleteTopics({ topics: [topic, out] });
  result.topicsLeft = (await admin.listTopics()).filter(n => n === topic || n === out).length;
  await admin.disconnect();
  console.log(JSON.stringify(result));
})().catch(e => { console.error(e.stack || e); process.exit(1); });
