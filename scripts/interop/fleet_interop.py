#!/usr/bin/env python3
"""A fleet of three `downpour daemon` processes on one PostgreSQL queue, against a real nginx.

A throw-away PostgreSQL cluster (initdb into a temporary directory, a random loopback port, as the unprivileged
user postgres when run as root) and an nginx on loopback. Three daemons share the queue (--queue) and one download
directory (one machine: storage every node sees); nginx sends each connection at a fixed rate:
1. 30 downloads added through one node run on all three (tellActive through any node names three nodes);
2. a pause through one node reaches a download another node runs, and an unpause through a third starts it again;
3. nodes are killed with SIGKILL at random moments, several times, and restarted (one of them only after its
   leases ran out, so that the others take its downloads over); then the database is stopped for 2 s and started
   again: an add meanwhile is refused ("cannot be reached"), reads answer, and the nodes connect again by
   themselves;
4. in the end every file is SHA-256-identical to the served one, every GID appears once among the results (all
   complete), and no file was fetched by two nodes at the same time (nginx's log, each node by its user agent): no
   download ran on two nodes at once;
5. a WebSocket client of node0 (websocket-client, which aria2p brings) is told of the start and the completion of
   9 more downloads added through node1, 6 of which the other nodes run, and its `downpour.onProgress` lists the
   three nodes with their addresses; node2's dashboard in headless Chromium lists the nodes and names the node of
   each active download.

Usage: fleet_interop.py BINARY [SEED]     Every wait has a deadline; the seed of the kill moments is printed.
"""

import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from fleet import Nginx, Node, Postgres, call, sha256, wait_for  # noqa: E402

FILES = 30
SIZE = 6 << 20
# nginx sends each connection at this rate, slower than a daemon reads: what nginx counts as sent is what the
# daemons received (a client that reads slower leaves bytes in socket buffers that a kill throws away).
CONNECTION_RATE = "200k"
LEASE_WAIT = 20  # s: longer than a lease (15 s), so that a node kept down loses its downloads to the others


def log(message):
    print(f"fleet-interop: {message}", flush=True)


def dashboard_shows_fleet(nodes, work):
    """node2's dashboard in headless Chromium lists the three nodes and says where each active download runs."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from dashboard_test import make_driver
    from selenium.webdriver.common.by import By

    driver = make_driver(f"{work}/chromium-profile")
    try:
        driver.get(f"http://127.0.0.1:{nodes[2].port}/")

        def nodes_listed():
            texts = [item.text for item in driver.find_elements(By.CSS_SELECTOR, "#nodes-list li")]
            return texts if len(texts) == 3 else None

        texts = wait_for("the dashboard's list of nodes", nodes_listed, limit=60)
        for node, text in zip(nodes, texts):
            assert text.startswith(f"{node.name} 127.0.0.1:{node.port} · ") and "active" in text, texts

        def runners_shown():
            stats = [element.text for element in driver.find_elements(By.CSS_SELECTOR, "#active-list .dl-stats")]
            return {text.rsplit(" · on ", 1)[1] for text in stats if " · on " in text} == {n.name for n in nodes}

        wait_for("the dashboard to say where downloads run", runners_shown, limit=60)
        log(f"5. node2's dashboard (Chromium) lists the nodes: {texts}; each active download names its node: ok")
    finally:
        driver.quit()


def told_of_fleet(nodes, nginx, downloads, expected, work):
    import websocket  # websocket-client, which aria2p brings

    socket_ = websocket.create_connection(f"ws://127.0.0.1:{nodes[0].port}/jsonrpc", timeout=2)
    try:
        socket_.send(json.dumps({"jsonrpc": "2.0", "id": "s", "method": "downpour.subscribe", "params": []}))
        more = f"{downloads}/more"
        names = [f"f{index}.bin" for index in range(9)]
        gids = [call(nodes[1].port, "aria2.addUri", [f"http://127.0.0.1:{nginx.port}/{name}"], {"dir": more})
                for name in names]

        # Nine at once only when each node runs three: six of them on node1 and node2.
        def all_active():
            active = call(nodes[1].port, "aria2.tellActive", ["gid", "node"])
            return {entry["gid"]: entry["node"] for entry in active if entry["gid"] in gids}

        runs = wait_for("nine downloads active on three nodes", lambda: len(all_active()) == 9 and all_active())
        assert sorted(runs.values()) == ["node0"] * 3 + ["node1"] * 3 + ["node2"] * 3, runs
        dashboard_shows_fleet(nodes, work)
        started, completed, nodes_listed = set(), set(), None
        deadline = time.monotonic() + 300
        while not (completed >= set(gids) and nodes_listed) and time.monotonic() < deadline:
            try:
                message = json.loads(socket_.recv())
            except websocket.WebSocketTimeoutException:
                continue
            method = message.get("method", "")
            if method == "aria2.onDownloadStart":
                started.add(message["params"][0]["gid"])
            elif method == "aria2.onDownloadComplete":
                completed.add(message["params"][0]["gid"])
            elif method == "downpour.onProgress" and "nodes" in message["params"][0]:
                nodes_listed = message["params"][0]["nodes"]
        assert started >= set(gids), f"node0's client was not told of the start of {set(gids) - started}"
        assert completed >= set(gids), f"node0's client was not told of the completion of {set(gids) - completed}"
        listed = {entry["name"]: (entry["address"], entry["up"]) for entry in nodes_listed}
        assert listed == {node.name: (f"127.0.0.1:{node.port}", "true") for node in nodes}, listed
        for name in names:
            assert sha256(f"{more}/{name}") == expected[name], f"more/{name} differs from the served file"
        log("5. node0's WebSocket client was told of 9 starts and completions (6 run by node1 and node2); "
            "its push lists the three nodes: ok")
    finally:
        socket_.close()


def main():
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".build/release/downpour")
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else random.randrange(1 << 30)
    rng = random.Random(seed)
    log(f"seed {seed}")
    work = tempfile.mkdtemp(prefix="downpour-fleet-")
    os.chmod(work, 0o755)
    www, downloads = f"{work}/www", f"{work}/downloads"
    os.makedirs(www)
    os.makedirs(downloads)
    expected = {}
    for index in range(FILES):
        data = os.urandom(SIZE)
        with open(f"{www}/f{index}.bin", "wb") as file:
            file.write(data)
        expected[f"f{index}.bin"] = hashlib.sha256(data).hexdigest()
    postgres = nginx = None
    nodes = []
    try:
        pg_dir = f"{work}/pg"
        os.makedirs(pg_dir)
        postgres = Postgres(pg_dir)
        nginx = Nginx(f"{work}/nginx", www, CONNECTION_RATE)
        nodes = [Node(binary, f"node{index}", postgres.url, work, downloads, ["--max-concurrent-downloads", "3"])
                 for index in range(3)]
        for node in nodes:
            node.start()

        # 1. Added through one node (one multicall), run on all three.
        calls = [{"methodName": "aria2.addUri", "params": [[f"http://127.0.0.1:{nginx.port}/f{index}.bin"]]}
                 for index in range(FILES)]
        gids = [answer[0] for answer in call(nodes[0].port, "system.multicall", calls)]
        assert len(set(gids)) == FILES, gids

        def running_nodes():
            active = call(nodes[2].port, "aria2.tellActive", ["gid", "node"])
            return {entry.get("node") for entry in active} == {"node0", "node1", "node2"} and active

        active = wait_for("downloads on all three nodes", running_nodes)
        log(f"1. {FILES} added through node0; active on {sorted({entry['node'] for entry in active})}: ok")

        # 2. A pause through node0 reaches a download node1 runs; an unpause through node2 starts it again.
        target = next(entry["gid"] for entry in active if entry["node"] == "node1")
        call(nodes[0].port, "aria2.pause", target)
        wait_for("the pause to reach node1",
                 lambda: call(nodes[2].port, "aria2.tellStatus", target, ["status"])["status"] == "paused")
        call(nodes[2].port, "aria2.unpause", target)
        log("2. paused through node0 while node1 ran it, unpaused through node2: ok")

        # 3. SIGKILL at random moments, restarted; node2 once stays down past its leases.
        for round_ in range(4):
            time.sleep(rng.uniform(1.0, 4.0))
            victim = nodes[rng.randrange(3)] if round_ != 2 else nodes[2]
            victim.kill()
            down = LEASE_WAIT if round_ == 2 else rng.uniform(0.2, 2.0)
            log(f"3. killed {victim.name} (-9), down {down:.1f} s")
            if round_ == 2:
                # The others take its downloads once its leases run out.
                survivor = nodes[0]

                def taken_over():
                    active = call(survivor.port, "aria2.tellActive", ["node"])
                    return all(entry.get("node") != "node2" for entry in active)

                wait_for("node2's downloads to be taken over", taken_over, limit=60)
            else:
                time.sleep(down)
            victim.start()

        # 3b. The database restarted under the running downloads: a change meanwhile is refused with a clear error,
        # reads answer from the last view, and the nodes connect again by themselves (step 4 needs them).
        postgres.stop_server()
        began = time.monotonic()
        try:
            call(nodes[1].port, "aria2.addUri", [f"http://127.0.0.1:{nginx.port}/late.bin"])
            raise AssertionError("an add was taken while the database was down")
        except RuntimeError as error:
            assert "cannot be reached" in str(error), error
        refused_in = time.monotonic() - began
        shown = call(nodes[2].port, "aria2.tellActive", ["gid"])
        time.sleep(max(0.0, 2.0 - (time.monotonic() - began)))
        assert postgres.start_server(), "PostgreSQL did not start again"
        log(f"3b. database down 2 s: an add refused in {refused_in:.2f} s ('cannot be reached'), tellActive answered "
            f"({len(shown)} active); started again")

        # 4. Everything complete, once, and identical.
        # Seen through every node: a node shows the fleet as it last read it until its own connections to the
        # restarted database are back (its pool reconnects with a back-off), so each is waited for.
        def finished():
            for node in nodes:
                stat = call(node.port, "aria2.getGlobalStat")
                if stat["numActive"] != "0" or stat["numWaiting"] != "0" or stat["numStopped"] != str(FILES):
                    return False
            return True

        wait_for("every download to end, seen through every node", finished, limit=600)
        stopped = call(nodes[0].port, "aria2.tellStopped", 0, 1000, ["gid", "status", "errorMessage"])
        listed = [entry["gid"] for entry in stopped]
        assert sorted(listed) == sorted(gids), f"results {len(listed)} for {len(gids)} GIDs"
        bad = [entry for entry in stopped if entry["status"] != "complete"]
        assert not bad, f"not complete: {bad}"
        names = sorted(os.listdir(downloads))
        assert names == sorted(expected), f"files in the directory: {names}"
        for name, digest in expected.items():
            assert sha256(f"{downloads}/{name}") == digest, f"{name} differs from the served file"
        requests = nginx.requests()
        served = {}
        for path, _, _, sent, *_ in requests:
            served[path] = served.get(path, 0) + sent
        ratios = {path: served.get(f"/{path}", 0) / SIZE for path in expected}
        worst = max(ratios, key=ratios.get)
        total = sum(served.get(f"/{path}", 0) for path in expected) / (SIZE * FILES)
        log(f"4. all {FILES} complete, once each, SHA-256-identical; bytes served: {total:.2f}x in all, "
            f"at most {ratios[worst]:.2f}x ({worst})")
        # No download ran on two nodes at once: no two nodes (the user agents) fetched one file at the same time.
        # A killed node's responses end when nginx finds its connections gone, at once; another node takes its
        # downloads a lease later.
        by_file = {}
        for path, start, end, _, agent, _ in requests:
            by_file.setdefault(path, []).append((start, end, agent))
        for path, spans in by_file.items():
            spans.sort()
            for index, (start, end, agent) in enumerate(spans):
                for other_start, _, other_agent in spans[index + 1:]:
                    if other_start >= end - 0.2:
                        break
                    assert other_agent == agent, (
                        f"{path} was fetched by {agent} and {other_agent} at once "
                        f"({start:.2f}-{end:.2f} and from {other_start:.2f})")
        log("   no file was fetched by two nodes at once")
        # A resume after a kill fetches again only what its last journal did not record.
        assert total < 1.5, f"the files were served {total:.2f} times over"

        # 5. node0's clients are told of the whole fleet's downloads; the push lists the nodes.
        told_of_fleet(nodes, nginx, downloads, expected, work)
        log("ok")
    except Exception:
        log(f"FAILED (seed {seed}); the nodes' logs:")
        for node in nodes:
            node.log.flush()
            with open(f"{work}/{node.name}.log", errors="replace") as file:
                print("".join(file.readlines()[-15:]), file=sys.stderr)
        raise
    finally:
        for node in nodes:
            node.stop()
        if nginx:
            nginx.stop()
        if postgres:
            postgres.stop()
        if os.environ.get("FLEET_KEEP"):
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
