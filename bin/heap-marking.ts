// When V8 starts marking the old generation for a full collection. By default it starts once the room left under the
// old generation's limit is no more than the young generation's capacity, which --max-semi-space-size=32 (the units,
// `npm start`, the shebang: README, Configuration) makes large: the limit V8 sets after a full collection often left
// less room than that from the start, so the control at 100 kB ran one full collection after another (every ~0.5 s,
// each marking the whole ~45 MB heap) while its old generation had hardly grown. With a trigger in percent, marking
// starts by a task once half the room the last collection left is used, at once past 80%: the limit itself, and so
// the most memory a process takes, is V8's as before (docs/decisions.md #79). Set here, before the service allocates
// much, rather than on each command line: V8 reads these two flags each time it decides (Node leaves the flags
// writable after start), and cluster workers run this module too.
import { setFlagsFromString } from 'node:v8';

setFlagsFromString('--incremental-marking-soft-trigger=50');
setFlagsFromString('--incremental-marking-hard-trigger=80');
