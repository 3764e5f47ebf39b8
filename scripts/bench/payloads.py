"""The test data nginx serves: files of random bytes made on demand, with their digests, kept while a case still to
come needs them. Stdlib only."""

import hashlib
import os
import shutil
import sys

from cases import MIB, DataFile, FileSet

CHUNK = MIB


def human(size):
    return "%.1f MiB" % (size / MIB)


def note(message):
    print(f"bench: {message}", file=sys.stderr, flush=True)


class Payloads:
    def __init__(self, www, work, out, base, scale):
        self.www, self.work, self.out, self.base, self.scale = www, work, out, base, scale
        self.made = {}  # key(payload) -> the template values of a row that downloads it

    def size(self, payload):
        """Bytes of one file: times --size-scale, at least 1 MiB (a FileSet with scaled=False: as written)."""
        if isinstance(payload, FileSet) and not payload.scaled:
            return payload.size
        return max(int(payload.size * self.scale), MIB)

    def key(self, payload):
        """What tells two payloads apart on disk (two DataFiles scaled to one size are one file)."""
        if isinstance(payload, DataFile):
            return ("data", self.size(payload))
        return ("set", payload.name)

    def total(self, payload):
        return self.size(payload) * (payload.count if isinstance(payload, FileSet) else 1)

    def values(self, payload):
        """Makes `payload` (once) and returns what row templates and the check of a run need: for a DataFile
        file, sha256, size; for a FileSet list, curl_config, manifest, set_dir, count, each, size (in all)."""
        key = self.key(payload)
        if key not in self.made:
            self.made[key] = self._make_file(payload) if isinstance(payload, DataFile) else self._make_set(payload)
        return self.made[key]

    def sha512(self, payload):
        values = self.values(payload)
        if "sha512" not in values:
            note(f"computing the SHA-512 of {values['file']}")
            values["sha512"] = digest(os.path.join(self.www, values["file"]), hashlib.sha512)
        return values["sha512"]

    def _write(self, path, size, hasher):
        try:
            with open(path, "wb") as f:
                left = size
                while left > 0:
                    block = os.urandom(min(CHUNK, left))
                    f.write(block)
                    hasher.update(block)
                    left -= len(block)
        except OSError as e:
            sys.exit(f"bench: could not write {path} ({e.strerror}; disk full?)")
        return hasher.hexdigest()

    def _make_file(self, payload):
        size = self.size(payload)
        name = f"data-{size}.bin"
        note(f"generating {name} ({human(size)}) from /dev/urandom")
        sha = self._write(os.path.join(self.www, name), size, hashlib.sha256())
        return {"file": name, "sha256": sha, "size": size}

    def _make_set(self, payload):
        each = self.size(payload)
        directory = os.path.join(self.www, payload.directory) if payload.directory else self.www
        os.makedirs(directory, exist_ok=True)
        note(f"generating {payload.count} files of {each} bytes from /dev/urandom")
        names = [f"{payload.prefix}{i:04d}.bin" for i in range(payload.count)]
        paths = {
            "list": os.path.join(self.work, f"{payload.name}.list"),
            "curl_config": os.path.join(self.work, f"{payload.name}.curl"),
            "manifest": os.path.join(self.work, f"{payload.name}.sha256"),
        }
        with open(paths["manifest"], "w") as manifest, open(paths["list"], "w") as urls, \
                open(paths["curl_config"], "w") as curl:
            for name in names:
                sha = self._write(os.path.join(directory, name), each, hashlib.sha256())
                url = payload.url.format(base=self.base, name=name)
                manifest.write(f"{sha}  {name}\n")
                urls.write(url + "\n")
                curl.write(f'url = "{url}"\noutput = "{os.path.join(self.out, name)}"\n')
        return {**paths, "set_dir": directory, "names": names, "count": payload.count, "each": each,
                "each_h": human(each), "size": each * payload.count, "keep": payload.keep}

    def drop_unless(self, needed):
        """Deletes what was made and none of the payloads `needed` (what the cases still to come use) is, but
        never a FileSet marked `keep`."""
        keep = {self.key(p) for p in needed}
        for key, values in list(self.made.items()):
            if key in keep or values.get("keep"):
                continue
            del self.made[key]
            if "file" in values:
                os.unlink(os.path.join(self.www, values["file"]))
            elif values["set_dir"] != self.www:
                shutil.rmtree(values["set_dir"], ignore_errors=True)
            else:
                for name in values["names"]:
                    os.unlink(os.path.join(values["set_dir"], name))


def digest(path, kind=hashlib.sha256):
    h = kind()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def manifest_matches(directory, manifest):
    """How many of the manifest's files in `directory` have their digest."""
    good = 0
    with open(manifest) as f:
        for line in f:
            sha, name = line.split()
            path = os.path.join(directory, name)
            if os.path.isfile(path) and digest(path) == sha:
                good += 1
    return good
