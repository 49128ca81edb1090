// KafkaJS over TLS / SASL: create a topic, produce N, consume them in a group committing each one,
// and print the consumed values and the group's committed offsets as JSON. The security options come
// as JSON: {"ssl": {"ca": PATH, "cert": PATH, "key": PATH}, "sasl": {"mechanism", "username", "password"}}.
const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

const [BOOT, topic, groupId, nArg, securityArg] = process.argv.slice(2);
const N = Number(nArg || 50);
const security = JSON.parse(securityArg || '{}');
const ssl = security.ssl && Object.fromEntries(Object.entries(security.ssl).map(
  ([k, path]) => [k, k === 'ca' ? [fs.readFileSync(path, 'utf-8')] : fs.readFileSync(path, 'utf-8')]));

(async () => {
  const kafka = new Kafka({ clientId: 'kjs-secure', brokers: BOOT.split(','), ssl, sasl: security.sasl,
                            logLevel: logLevel.WARN });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 3 }], waitForLeaders: true });
  const producer = kafka.producer();
  await producer.connect();
  const messages = [];
  for (let i = 0; i < N; i++) messages.push({ value: 'm' + i });
  await producer.send({ topic, messages, acks: -1 });
  await producer.disconnect();

  const seen = [];
  let resolveDone;
  const done = new Promise((r) => (resolveDone = r));
  const consumer = kafka.consumer({ groupId });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      seen.push(message.value.toString());
      await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }]);
      if (seen.length >= N) resolveDone();
    },
  });
  await Promise.race([done, new Promise((r) => setTimeout(r, 60000))]);
  await consumer.disconnect();
  const committed = await admin.fetchOffsets({ groupId, topics: [topic] });
  await admin.disconnect();
  const total = committed[0].partitions.reduce((sum, p) => sum + Number(p.offset), 0);
  console.log(JSON.stringify({ seen, committed: total }));
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(2); });
