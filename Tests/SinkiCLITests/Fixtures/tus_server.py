"""A tuspyserver (FastAPI router under uvicorn: a tus server we did not write) on 127.0.0.1, for the
interop tests. usage: tus_server.py PORT FILES_DIR. Uploads are at http://127.0.0.1:PORT/files/."""
import signal, sys
import uvicorn
from fastapi import FastAPI
from tuspyserver import create_tus_router

# A test runner may start us with SIGTERM blocked (a mask inherited through one of its threads); the
# tests stop this server with SIGTERM and expect uvicorn's graceful stop.
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})

app = FastAPI()
app.include_router(create_tus_router(prefix="files", files_dir=sys.argv[2]))
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="info")
