// KafkaJS admin: list and describe a group ("describe") or delete it ("delete"); prints JSON.
const { Kafka, logLevel } = require('kafkajs');

const [BOOT, groupId, action] = process.argv.slice(2);

(async () => {
  const kafka = new Kafka({ clientId: 'kjs-admin', brokers: [BOOT], logLevel: logLevel.WARN });
  const admin = kafka.admin();
  await admin.connect();
  const out = {};
  if (action === 'delete') {
    await admin.deleteGroups([groupId]);
  } else {
    const { groups } = await admin.describeGroups([groupId]);
    out.state = groups[0].state;
    out.clients = groups[0].members.map((m) => m.clientId);
  }
  out.listed = (await admin.listGroups()).groups.map((g) => g.groupId);
  await admin.disconnect();
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(2); });
