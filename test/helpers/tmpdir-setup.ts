// Loaded first into every test process (package.json, tap's node-arg): test data goes to a RAM disk when one
// has room, and compiled code is cached on disk for every process of the run.
import { enableCompileCache } from 'node:module';
import { statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// On ext4 each file a test creates costs a search for a free inode among the thousands that earlier
// tests created and deleted (a PGlite cluster alone is about 1,200 files): seconds of kernel time per test
// file, most of the system time of the suite. os.tmpdir() reads TMPDIR, and the children tests spawn inherit
// it. A TMPDIR already set is left alone.
const RAM_DISK = '/dev/shm';
/** Room for the data of the services two test files run at once, with a wide margin (a container's default
 * /dev/shm of 64 MB is not enough). */
const NEEDED_BYTES = 2 * 1024 ** 3;

if (!process.env.TMPDIR) {
  try {
    const fs = statfsSync(RAM_DISK);
    if (fs.bavail * fs.bsize >= NEEDED_BYTES) process.env.TMPDIR = RAM_DISK;
  } catch {
    // No RAM disk here: the system's temporary directory.
  }
}

// Every test file is a process that loads the service's modules, and many start `svc` children that load them
// again: a `svc start` spent ~2.1 s of CPU before it listened, ~0.8 s of it compiling what it loaded. V8's code
// cache on disk, shared by the whole run through the environment the children inherit, saves that from the second
// load on. Tests only, on a machine that runs nothing else: the service keeps no cache in a shared temporary
// directory, where another local user could plant one (V8 would run the code it holds).
process.env.NODE_COMPILE_CACHE ??= join(tmpdir(), 'svc-test-compile-cache');
enableCompileCache(process.env.NODE_COMPILE_CACHE);

// tap's processinfo, which tap loads into each test process and, through the NODE_OPTIONS it adds to every spawn, into
// each child of one, records every module a process loads (for coverage and `tap --changed`, neither of which this
// suite uses): it reads the file again and scans it, ~0.3 s of CPU for the ~1,200 modules of a `svc start`. A pattern
// that excludes every file makes that a no-op in the children, which inherit it (`svc` children, fixtures); this
// process read tap's own before this file ran.
process.env._TAPJS_PROCESSINFO_EXCLUDE_ = '/./';
