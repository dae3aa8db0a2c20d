"""Uploads a file to a tus server with tuspy, as a user would.

    python tuspy_upload.py URL FILE NAME STORE [--stop-at N] [--chunk N]

STORE is tuspy's URL storage (a TinyDB file): a run that stopped (or was
killed) leaves the upload URL there under the file's fingerprint, and the
next run with the same STORE resumes from the server's offset (HEAD).
Prints "offset N" when done or stopped, and "url URL".
"""
import argparse

from tusclient import client
from tusclient.storage import filestorage

p = argparse.ArgumentParser()
p.add_argument("url")
p.add_argument("file")
p.add_argument("name")
p.add_argument("store")
p.add_argument("--stop-at", type=int, default=None)
p.add_argument("--chunk", type=int, default=256 * 1024)
a = p.parse_args()

storage = filestorage.FileStorage(a.store)
c = client.TusClient(a.url)
u = c.uploader(
    a.file,
    chunk_size=a.chunk,
    metadata={"filename": a.name},
    store_url=True,
    url_storage=storage,
    upload_checksum=True,  # sha1 per PATCH: the server's checksum extension
)
print("start", u.offset, flush=True)
u.upload(stop_at=a.stop_at)
print("url", u.url)
print("offset", u.offset, flush=True)
