"""A Docker engine of the test's own, and the images the compose test needs, on this machine.

No image registry is reachable here, so the images are made from Debian's packages:
``debootstrap`` builds a minimal bookworm root file system with python3 (the stand-in for
python:3.11-slim) and another with Debian's ``zookeeper`` (the stand-in for a ZooKeeper image);
both are kept as tar files in a cache dir between runs, and imported into the engine each run.

``DockerEngine`` runs ``dockerd`` with its own data and exec roots under a temporary dir, the
overlay2 storage driver where this kernel mounts overlayfs there (vfs, which copies every layer and
every container's file system in full, otherwise: minutes more per run), and no networking of its own (containers use the host's network); ``close()``
stops it and removes everything it stored. The dir is a tmpfs where one can be mounted: the images'
tens of thousands of files are then written and removed in memory, not on a disk other tests keep
busy (on the disk, removing them alone took a minute). ``engine_unavailable()`` says why one cannot run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

CACHE_DIR = Path(os.environ.get("MINIKAFKA_TEST_CACHE", "/var/cache/minikafka-tests"))
PYTHON_BASE = "minikafka-test-python:bookworm"
ZOOKEEPER_BASE = "minikafka-test-zookeeper:bookworm"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


def engine_unavailable() -> str | None:
    for command in ("dockerd", "docker", "debootstrap"):
        if shutil.which(command) is None:
            return f"{command} is not installed (make test installs docker.io, docker-compose and debootstrap)"
    if shutil.which("docker-compose") is None and subprocess.run(
            ["docker", "compose", "version"], capture_output=True).returncode != 0:
        return "neither docker-compose nor the docker compose plugin is installed"
    return None


class DockerEngine:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.socket = root / "docker.sock"
        self.env = dict(os.environ, DOCKER_HOST=f"unix://{self.socket}")
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = root / "dockerd.log"
        self.storage_driver = "vfs"
        self.in_memory = False

    def start(self, timeout: float = 60) -> DockerEngine:
        # Room for the images (about 1.5 GB) and the containers' logs and volumes; a tmpfs takes only
        # the memory its files fill. close() unmounts it with the engine's other mounts.
        self.in_memory = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=6g,mode=0700", "tmpfs", str(self.root)],
            capture_output=True).returncode == 0
        self.storage_driver = storage_driver(self.root)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                ["dockerd", f"--storage-driver={self.storage_driver}", "--iptables=false", "--bridge=none",
                 "--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec"),
                 "--pidfile", str(self.root / "dockerd.pid"), "--host", f"unix://{self.socket}"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise EngineFailed(f"dockerd exited ({self.process.returncode}): {self.log_tail()}")
            if self.run("version", check=False).returncode == 0:
                return self
            time.sleep(0.5)
        raise EngineFailed(f"dockerd did not answer within {timeout:.0f}s: {self.log_tail()}")

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def run(self, *args: str, check: bool = True, timeout: float = 900, **kwargs: object
            ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(["docker", *args], env=self.env, capture_output=True, text=True, timeout=timeout,
                                **kwargs)  # type: ignore[call-overload]
        if check and result.returncode != 0:
            raise AssertionError(f"docker {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n"
                                 f"{result.stderr}")
        return result

    @contextlib.contextmanager
    def importing_base_images(self, first: str) -> Iterator[None]:
        """The two stand-in base images (made once per cache dir): ``first`` is imported on entry,
        the other while the ``with`` block runs (the broker image's build needs only the Python
        one), and has been imported, or has failed, on exit."""
        wanted = {PYTHON_BASE: ["python3", "python3-venv"], ZOOKEEPER_BASE: ["zookeeper"]}
        tars = {name: CACHE_DIR / (name.replace(":", "-").replace("/", "-") + ".tar") for name in wanted}
        missing = [name for name, tar in tars.items() if not tar.exists()]
        # Both at once: most of the time is spent waiting for the mirror.
        for build in [_Debootstrap(wanted[name], tars[name]) for name in missing]:
            build.finish()
        with open(tars[first], "rb") as data:
            self.run("import", "-", first, stdin=data)
        (other,) = (name for name in tars if name != first)
        with open(tars[other], "rb") as data:
            importing = subprocess.Popen(["docker", "import", "-", other], env=self.env, stdin=data,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            try:
                yield
            finally:
                output, _ = importing.communicate(timeout=900)
        if importing.returncode != 0:
            raise AssertionError(f"docker import of {other} failed ({importing.returncode}):\n{output}")

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        # Containers' processes are children of containerd-shims, which dockerd stops with itself;
        # any left (a killed dockerd) are found by the root they run under.
        subprocess.run(["pkill", "-f", str(self.root)], check=False)
        for mount in reversed(_mounts_under(self.root)):
            subprocess.run(["umount", "-l", mount], check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def storage_driver(root: Path) -> str:
    """overlay2 if an overlay file system mounts under root, else vfs."""
    probe = Path(tempfile.mkdtemp(prefix="overlay-probe-", dir=root))
    layers = [probe / name for name in ("lower", "upper", "work", "merged")]
    for layer in layers:
        layer.mkdir()
    lower, upper, work, merged = layers
    mounted = subprocess.run(
        ["mount", "-t", "overlay", "overlay", "-o", f"lowerdir={lower},upperdir={upper},workdir={work}", str(merged)],
        capture_output=True).returncode == 0
    if mounted:
        subprocess.run(["umount", str(merged)], check=False)
    shutil.rmtree(probe, ignore_errors=True)
    return "overlay2" if mounted else "vfs"


class EngineFailed(Exception):
    pass


class _Debootstrap:
    def __init__(self, packages: list[str], tar: Path) -> None:
        self.tar = tar
        self.work = Path(tempfile.mkdtemp(prefix="minikafka-rootfs-"))
        self.rootfs = self.work / "rootfs"
        self.log = self.work / "debootstrap.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                ["debootstrap", "--variant=minbase", f"--include={','.join(packages)}", "bookworm", str(self.rootfs),
                 _debian_mirror()], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def finish(self) -> None:
        try:
            code = self.process.wait(900)
            if code != 0:
                raise EngineFailed(f"debootstrap failed ({code}): {self.log.read_text(errors='replace')[-2000:]}")
            if CA_BUNDLE.exists():  # so that pip in a build trusts what this machine trusts
                (self.rootfs / "etc/ssl/certs").mkdir(parents=True, exist_ok=True)
                shutil.copyfile(CA_BUNDLE, self.rootfs / "etc/ssl/certs/ca-certificates.crt")
            self.tar.parent.mkdir(parents=True, exist_ok=True)
            partial = self.tar.with_suffix(".partial")
            subprocess.run(["tar", "-C", str(self.rootfs), "-cf", str(partial), "."], check=True)
            partial.rename(self.tar)
        finally:
            with contextlib.suppress(Exception):
                self.process.kill()
            shutil.rmtree(self.work, ignore_errors=True)


def _debian_mirror() -> str:
    """The Debian mirror apt already uses on this machine."""
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        try:
            text = path.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split()
            if words[:1] == ["URIs:"] and "security" not in line:
                return words[1]
            if words[:1] == ["deb"] and len(words) > 2 and "security" not in line:
                return words[2] if not words[1].startswith("[") else words[3]
    return "http://deb.debian.org/debian"


def _mounts_under(root: Path) -> list[str]:
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    return [fields[1] for fields in (line.split() for line in lines) if fields[1].startswith(str(root))]
