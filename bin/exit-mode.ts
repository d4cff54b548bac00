// How `svc` ends once its command is done (bin/svc.ts, docs/decisions.md #80). A command lets its event loop run dry;
// a process that ran the service ends by process.exit(), as it always has: its stop has drained and closed what it
// opened, and a natural end would then run native addons' exit-time finalizers, where one of the bench's MTA processes
// died with SIGSEGV.
let servedMail = false;

/** Says that this process runs the service (`svc start`, `svc dev`): it ends by process.exit(). */
export function markServiceProcess(): void {
  servedMail = true;
}

/** Whether this process ran the service (markServiceProcess). */
export const isServiceProcess = (): boolean => servedMail;
