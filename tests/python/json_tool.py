"""Re-serialises JSON documents the way the SDS profile defines, with Python's own json module.

Input on stdin: documents separated by NUL bytes. For each document, prints compact and pretty
forms (as the profile defines them) separated by NUL, one pair per input document.
"""
import json
import sys

data = sys.stdin.buffer.read()
out = []
for raw in data.split(b"\0"):
    if not raw:
        continue
    doc = json.loads(raw.decode("utf-8"))
    compact = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    pretty = json.dumps(doc, sort_keys=True, ensure_ascii=False, indent=2) + "\n"
    out.append(compact.encode("utf-8"))
    out.append(pretty.encode("utf-8"))
sys.stdout.buffer.write(b"\0".join(out))
