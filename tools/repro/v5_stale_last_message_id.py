"""Smallest reproduction: GET_LAST_MESSAGE_ID on a v5 segment stays at its first answer after later txn commits."""
import sys, uuid
sys.path.insert(0, "/work/wt-pulsar")
from harness.client import PulsarClient
from harness.client.admin import AdminClient
from harness.client.timers import Deadline
svc, adm = sys.argv[1], sys.argv[2]
topic = f"topic://public/default/lmid-{uuid.uuid4().hex[:6]}"
AdminClient(adm).create_scalable_topic(topic, 1)
c = PulsarClient(svc, txn_path="v5", listener_name="external", operation_timeout_s=20)
p = c.create_producer(topic)
sub = c.subscribe(topic, "s", sub_type="Exclusive")
seg = sub.consumers[0]
def commit_one(v):
    t = c.new_transaction(timeout_s=60); r = p.send(v.encode(), txn=t); t.commit(); return r.message_id
print("topic", topic)
print("txn 1 committed at", commit_one("m1"))
print("GET_LAST_MESSAGE_ID ->", seg.last_message_id(Deadline.after(10)))
for i in (2, 3):
    print(f"txn {i} committed at", commit_one(f"m{i}"))
import time; time.sleep(2)
got = []
while (m := sub.receive(timeout_s=3)) is not None: got.append((m.data.decode(), m.msg_id)); sub.acknowledge(m)
print("durable subscription received", got)
print("GET_LAST_MESSAGE_ID ->", seg.last_message_id(Deadline.after(10)))
r = c.create_reader(topic)
print("fresh reader GET_LAST_MESSAGE_ID ->", r._consumer.consumers[0].last_message_id(Deadline.after(10)) if hasattr(r, "_consumer") else "n/a")
c.close()
