// libuv's thread pool, where the MTA makes its DKIM signatures (docs/decisions.md #75), sized to the cores this process
// may run on, at most libuv's default of 4: on two cores, four threads signing beside the event loop preempt it more
// than two do (docs/decisions.md #78). An operator's UV_THREADPOOL_SIZE stands. libuv reads the variable when its pool
// first starts, after this module: bin/svc.ts imports it before anything else, and cluster workers inherit it.
import { availableParallelism } from 'node:os';

process.env.UV_THREADPOOL_SIZE ??= String(Math.min(4, availableParallelism()));
