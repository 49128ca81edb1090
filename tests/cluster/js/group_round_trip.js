// KafkaJS: create a 6-partition topic, produce N, consume with three consumers in one group
// (manual commits), disconnect cleanly, and print the consumed (partition, offset) pairs as JSON.
const { Kafka, logLevel } = require('kafkajs');

const [BOOT, topic, groupId, nArg] = process.argv.slice(2);
const N = Number(nArg || 1000);

(async () => {
  const kafka = new Kafka({ clientId: 'kjs', brokers: [BOOT], logLevel: logLevel.WARN });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 6, replicationFactor: 1 }], waitForLeaders: true });
  const producer = kafka.producer();
  await producer.connect();
  for (let b = 0; b < N; b += 100) {
    const messages = [];
    for (let i = b; i < Math.min(N, b + 100); i++) messages.push({ key: String(i), value: 'm' + i });
    await producer.send({ topic, messages, acks: -1 });
  }
  await producer.disconnect();

  const seen = [];
  let resolveDone;
  const done = new Promise((r) => (resolveDone = r));
  const consumers = [];
  for (let k = 0; k < 3; k++) {
    const consumer = kafka.consumer({ groupId });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    consumers.push(consumer);
  }
  await Promise.all(consumers.map((consumer) => consumer.run({
    autoCommit: false,
    eachMessage: async ({ topic: t, partition, message }) => {
      seen.push([partition, Number(message.offset)]);
      await consumer.commitOffsets([{ topic: t, partition, offset: (BigInt(message.offset) + 1n).toString() }]);
      if (seen.length >= N) resolveDone();
    },
  })));
  await Promise.race([done, new Promise((r) => setTimeout(r, 90000))]);
  for (const consumer of consumers) await consumer.disconnect();
  const groups = (await admin.listGroups()).groups.filter((g) => g.groupId === groupId);
  await admin.disconnect();
  console.log(JSON.stringify({ seen, groups }));
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(2); });
