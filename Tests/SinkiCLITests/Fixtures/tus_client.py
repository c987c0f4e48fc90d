"""Drives the tuspy client (a tus client we did not write) against a server, for the interop tests.

usage: tus_client.py ENDPOINT FILE [--chunk-size N] [--checksum] [--stop-at N] [--url UPLOAD_URL] [--token T]
Prints the upload URL on stdout, then the offset reached.
"""
import argparse, os, sys
from tusclient import client

parser = argparse.ArgumentParser()
parser.add_argument("endpoint")
parser.add_argument("file")
parser.add_argument("--chunk-size", type=int, default=1 << 20)
parser.add_argument("--checksum", action="store_true")
parser.add_argument("--stop-at", type=int)
parser.add_argument("--url")
parser.add_argument("--token")
args = parser.parse_args()

headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
tus = client.TusClient(args.endpoint, headers=headers)
uploader = tus.uploader(file_path=args.file, chunk_size=args.chunk_size, upload_checksum=args.checksum, url=args.url,
                        metadata={"filename": os.path.basename(args.file), "filetype": "application/octet-stream"})
uploader.upload(stop_at=args.stop_at)
print(uploader.url)
print(uploader.offset)
