#!/usr/bin/env python3
# Usage: unread.py CORRAL FAKESERVER [N] [MAXWAIT]
#   go build -o /tmp/corral . && go build -o /tmp/fakeserver ./fakeserver
#   python3 bench/unread/unread.py /tmp/corral /tmp/fakeserver 100 420
# A client that stops reading (issue 24): starts CORRAL with one fakeserver
# (requestTimeout 10m, so that a slow machine's answers all come), opens one
# session, POSTs N calls of the big tool (16 MiB answers, N=100 by default)
# from raw sockets with a 4 KiB receive buffer that never read, and prints
# corral's VmRSS and VmHWM every 5 s for MAXWAIT seconds (240 by default);
# then closes the sockets and watches 30 s more. See docs/performance.md.
import json, os, socket, subprocess, sys, tempfile, time, urllib.request
corral, fake = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 100
maxwait = int(sys.argv[4]) if len(sys.argv) > 4 else 240
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
d = tempfile.mkdtemp()
cfg = os.path.join(d, "config.json")
json.dump({"listen": f"127.0.0.1:{port}", "requestTimeout": "10m", "mcpServers": {"f": {"command": fake, "args": ["-lifetime", "15m"]}}}, open(cfg, "w"))
p = subprocess.Popen([corral, "-config", cfg], stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "log"), "w"))
def mem():
    out = {}
    for line in open(f"/proc/{p.pid}/status"):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"): out[k] = int(v.split()[0]) // 1024
    return out["VmRSS"], out["VmHWM"]
url = f"http://127.0.0.1:{port}/mcp"
for _ in range(100):
    try:
        if urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz").status == 200: break
    except Exception: time.sleep(0.2)
def post(body, sid=None):
    r = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json", "Accept": "application/json"} | ({"Mcp-Session-Id": sid} if sid else {}))
    return urllib.request.urlopen(r)
r = post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "m", "version": "1"}}})
sid = r.headers["Mcp-Session-Id"]; r.read()
post({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid).read()
time.sleep(1)
base, _ = mem()
print(f"baseline VmRSS {base} MiB", flush=True)
socks = []
t0 = time.time()
for i in range(n):
    c = socket.socket(); c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c.connect(("127.0.0.1", port))
    body = json.dumps({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {"name": "big", "arguments": {"bytes": 16 << 20}}}).encode()
    c.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json\r\nMcp-Session-Id: {sid}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    socks.append(c)
near = None; peak = 0; maxrss = 0
while time.time() - t0 < maxwait:
    rss, hwm = mem(); peak = max(peak, hwm)
    t = time.time() - t0
    print(f"t={t:5.0f}s VmRSS={rss} MiB VmHWM={hwm} MiB", flush=True)
    if rss > maxrss: maxrss, near = rss, None
    if near is None and maxrss > base + 50 and rss < base + 50: near = t
    time.sleep(5)
print(f"peak VmHWM {peak} MiB; RSS back within 50 MiB of baseline at {near if near is None else round(near)} s (with the sockets open)", flush=True)
for c in socks: c.close()
t1 = time.time()
after = None
while time.time() - t1 < 30:
    rss, hwm = mem()
    if after is None and rss < base + 50: after = time.time() - t1
    time.sleep(1)
print(f"after closing the sockets: VmRSS {mem()[0]} MiB; within 50 MiB of baseline {after if after is None else round(after)} s after closing", flush=True)
p.terminate(); p.wait()
