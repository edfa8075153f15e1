"""Run under Ganeti 3.0.2's own Python package (PYTHONPATH): drive our daemons
with Ganeti's LUXI and confd clients and print what they got, as JSON.

usage: ganeti_clients.py LUXI_SOCKET CONFD_IP CONFD_PORT HMAC_KEY_FILE
"""

import json
import sys

from ganeti import constants, luxi, opcodes
from ganeti.confd import client as confd_client


def main():
    sock, confd_ip, confd_port, hmac_path = sys.argv[1:5]
    out = {}
    cl = luxi.Client(address=sock)
    job_id = cl.SubmitJob([opcodes.OpTestDelay(duration=0.01, repeat=2)])
    out["job_id"] = job_id
    prev = None
    logs = []
    serial = None
    while True:
        answer = cl.WaitForJobChangeOnce(job_id, ["status"], prev, serial)
        if answer == constants.JOB_NOTCHANGED:
            continue
        prev, new_logs = answer
        for entry in new_logs:
            logs.append(entry[3])
            serial = entry[0]
        if prev[0] in constants.JOBS_FINALIZED:
            break
    out["status"] = prev[0]
    out["log"] = logs
    out["query_jobs"] = cl.QueryJobs([job_id], ["id", "status", "opresult", "summary"])
    out["cluster_name"] = cl.QueryClusterInfo()["name"]
    response = cl.Query("node", ["name", "role"], None)
    out["nodes"] = [[cell[1] for cell in row] for row in response.data]
    out["config_values"] = cl.QueryConfigValues(["cluster_name", "drain_flag"])

    with open(hmac_path) as handle:  # as Ganeti reads it: text, newline included
        key = handle.read()
    store = confd_client.StoreResultCallback()
    cc = confd_client.ConfdClient(key, [confd_ip], confd_client.ConfdFilterCallback(store), port=int(confd_port))
    request = confd_client.ConfdClientRequest(type=constants.CONFD_REQ_CLUSTER_MASTER)
    cc.SendRequest(request, async_=False)
    timed_out, _sent, received = cc.WaitForReply(request.rsalt)
    got, upcall = store.GetResponse(request.rsalt)
    out["confd"] = {
        "timed_out": timed_out,
        "received": received,
        "status": upcall.server_reply.status if got else None,
        "answer": upcall.server_reply.answer if got else None,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
