#!/usr/bin/env python3
"""Sends exactly N requests over C keep-alive connections (for bench/http/profile.sh: callgrind
counts the server's instructions, so the number of requests must be exact, not timed).

    drive.py URL METHOD N CONNECTIONS [BODY]
Exits non-zero when an answer is not 2xx."""
import http.client
import sys
import threading
import urllib.parse

url, method, total, conns = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
body = sys.argv[5] if len(sys.argv) > 5 else None
parts = urllib.parse.urlsplit(url)
path = parts.path + ("?" + parts.query if parts.query else "")
headers = {"Content-Type": "application/json"} if body is not None else {}
failures = []


def worker(count):
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=600)
    for _ in range(count):
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        if response.status >= 300:
            failures.append(response.status)
    conn.close()


threads = [threading.Thread(target=worker, args=(total // conns + (i < total % conns),))
           for i in range(conns)]
for t in threads:
    t.start()
for t in threads:
    t.join()
if failures:
    print(f"drive.py: {len(failures)} answers not 2xx (first {failures[0]})", file=sys.stderr)
    sys.exit(1)
