"""The lossy case's network: two namespaces joined by a link with delay and loss each way (the kernel's netem on a
veth pair, else scripts/bench/delayline.py between two TAP devices), and nginx in one of them. Needs root.
Stdlib only."""

import os
import subprocess
import sys
import time

from server import Nginx, stop

HERE = os.path.dirname(os.path.abspath(__file__))


class Skip(Exception):
    """The link cannot be set up here; the case is skipped with this reason."""


def ip(*args, ns=None):
    """Runs `ip [-n NS] ARGS`; True when it succeeded."""
    argv = ["ip", *(["-n", ns] if ns else []), *args]
    return subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE).returncode == 0


def in_ns(ns, *argv, **kwargs):
    return subprocess.run(["ip", "netns", "exec", ns, *argv], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, **kwargs)


class LossyLink:
    def __init__(self, link, work, nginx, www, stub_status, congestion_control, note):
        self.link = link
        self.dir = os.path.join(work, "lossy")
        os.makedirs(self.dir, exist_ok=True)
        self.nginx = Nginx(nginx, self.dir, www, stub_status, note)
        self.cc, self.note = congestion_control, note
        self.server_ns = f"dpbench-srv-{os.getpid()}"
        self.client_ns = f"dpbench-cli-{os.getpid()}"
        self.namespaces = []
        self.delay_line = None
        self.kind = ""
        self.base = f"http://{link.server_ip}:{link.port}"

    def up(self):
        """Raises Skip when something cannot be set up (what was set up stays for down())."""
        if os.geteuid() != 0:
            raise Skip("needs root (network namespaces)")
        for ns in (self.server_ns, self.client_ns):
            result = subprocess.run(["ip", "netns", "add", ns], capture_output=True, text=True)
            if result.returncode != 0:
                raise Skip(f"ip netns add failed: {result.stderr.strip()}")
            self.namespaces.append(ns)
            if not ip("link", "set", "lo", "up", ns=ns):
                raise Skip("cannot bring up lo in the namespaces")
            in_ns(ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
            if self.cc and in_ns(ns, "sysctl", "-qw", f"net.ipv4.tcp_congestion_control={self.cc}").returncode:
                raise Skip(f"cannot set congestion control {self.cc}")
        if not self._netem():
            self._delay_line()
        link = self.link
        ok = (ip("addr", "add", f"{link.server_ip}/30", "dev", "dpb0", ns=self.server_ns)
              and ip("addr", "add", f"{link.client_ip}/30", "dev", "dpb1", ns=self.client_ns)
              and ip("link", "set", "dpb0", "up", ns=self.server_ns)
              and ip("link", "set", "dpb1", "up", ns=self.client_ns))
        if not ok:
            raise Skip("cannot configure the link addresses")
        conf = self.nginx.write_conf(f"{link.server_ip}:{link.port}")
        if not self.nginx.start(conf, lambda: self.curl("-o", "/dev/null", f"{self.base}/conn") is not None,
                                prefix_argv=("ip", "netns", "exec", self.server_ns)):
            raise Skip(f"nginx in {self.server_ns} not reachable from {self.client_ns} over the link: "
                       + tail(os.path.join(self.dir, "error.log")))

    def _netem(self):
        """1. The kernel's netem on both ends of a veth pair, when it has it (loss on the server's end is the data's)."""
        def netem(loss_pct):
            return ["delay", f"{self.link.delay_ms}ms", "loss", f"{loss_pct:g}%", "limit", "100000"]
        if not ip("link", "add", "dpb0", "type", "veth", "peer", "name", "dpb1", "netns", self.client_ns,
                  ns=self.server_ns):
            self.note("no veth pair; using the userspace delay line")
            return False
        for ns, dev, loss in ((self.server_ns, "dpb0", self.link.loss_from_server),
                              (self.client_ns, "dpb1", self.link.loss_from_client)):
            result = in_ns(ns, "tc", "qdisc", "add", "dev", dev, "root", "netem", *netem(loss))
            if result.returncode != 0:
                self.note(f"no netem qdisc ({result.stderr.strip().splitlines()[0] if result.stderr.strip() else '?'})"
                          "; using the userspace delay line")
                ip("link", "del", "dpb0", ns=self.server_ns)
                return False
        self.kind = "veth pair with netem on both ends"
        return True

    def _delay_line_argv(self):
        """delayline.c compiled with `cc -O2` (a fraction of the CPU per frame), else delayline.py."""
        binary = os.path.join(self.dir, "delayline")
        result = subprocess.run(["cc", "-O2", "-Wall", "-o", binary, os.path.join(HERE, "delayline.c")],
                                stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if result.returncode == 0:
            return [binary], "C"
        self.note("cannot compile delayline.c (%s); using delayline.py"
                  % (result.stderr.strip().splitlines() or ["no compiler"])[0])
        return [sys.executable, os.path.join(HERE, "delayline.py")], "python3"

    def _delay_line(self):
        """2. Userspace: two TAP devices bridged by the delay line, one of them moved into the client namespace."""
        argv, language = self._delay_line_argv()
        out = os.path.join(self.dir, "delayline.out")
        with open(out, "wb") as o, open(os.path.join(self.dir, "delayline.err"), "wb") as e:
            self.delay_line = subprocess.Popen(
                ["ip", "netns", "exec", self.server_ns, *argv,
                 "--a", "dpb0", "--b", "dpb1", "--delay-ms", str(self.link.delay_ms),
                 "--loss-from-a", "%.6f" % (self.link.loss_from_server / 100),
                 "--loss-from-b", "%.6f" % (self.link.loss_from_client / 100), "--max-seconds", "21600"],
                stdin=subprocess.DEVNULL, stdout=o, stderr=e)
        for _ in range(50):
            with open(out) as f:
                if "ready" in f.read():
                    break
            if self.delay_line.poll() is not None:
                raise Skip("delay line did not start: " + tail(os.path.join(self.dir, "delayline.err")))
            time.sleep(0.1)
        else:
            raise Skip("delay line did not start: " + tail(os.path.join(self.dir, "delayline.err")))
        if not ip("link", "set", "dpb1", "netns", self.client_ns, ns=self.server_ns):
            raise Skip(f"cannot move the TAP device into {self.client_ns}")
        ip("link", "set", "dpb0", "txqueuelen", "10000", ns=self.server_ns)
        ip("link", "set", "dpb1", "txqueuelen", "10000", ns=self.client_ns)
        self.kind = f"userspace delay line ({language}, 2 TAP devices)"

    def curl(self, *args):
        """curl -sf ARGS in the client namespace: its standard output, or None."""
        result = in_ns(self.client_ns, "curl", "-sf", "--max-time", "5", *args)
        return result.stdout if result.returncode == 0 else None

    def describe(self):
        """Template values for the case's title: rtt (one TCP connect), link, cc."""
        connect = self.curl("-o", "/dev/null", "-w", "%{time_connect}", f"{self.base}/conn")
        try:
            rtt = "%.0f ms" % (float(connect) * 1000)
        except (TypeError, ValueError):
            rtt = "?"
        cc = in_ns(self.client_ns, "cat", "/proc/sys/net/ipv4/tcp_congestion_control").stdout.strip() or "?"
        self.note(f"lossy link: {self.kind}; TCP connect (1 RTT) {rtt}; congestion control {cc}")
        return {"rtt": rtt, "link": self.kind, "cc": cc}

    def down(self):
        self.nginx.stop()
        if self.delay_line is not None:
            stop(self.delay_line, "delay line", self.note)
            self.delay_line = None
            err = os.path.join(self.dir, "delayline.err")
            if os.path.exists(err):
                with open(err) as f:
                    for line in f:
                        self.note(line.rstrip())
        for ns in self.namespaces:
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)
        self.namespaces = []


def tail(path):
    try:
        with open(path) as f:
            lines = f.read().strip().splitlines()
        return lines[-1] if lines else ""
    except OSError:
        return ""
