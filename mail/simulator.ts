// The mailbox simulator (docs/api.md §4.11, "Simulator"): addresses at `simulator.<SVC_HOSTNAME>` that are
// never sent out but answer as a real mailbox would, as SES's and Resend's do, so that an integration can
// see every outcome and its webhook without mailing anyone. The local part says which outcome; a `+label`
// suffix is ignored, so that one test run can tell its messages apart.

export type SimulatedOutcome = 'delivered' | 'bounced' | 'deferred' | 'complained' | 'suppressed';

const OUTCOMES: ReadonlySet<string> = new Set<SimulatedOutcome>([
  'delivered',
  'bounced',
  'deferred',
  'complained',
  'suppressed',
]);

/** The simulator's domain for an MTA named `hostname`. */
export const simulatorDomain = (hostname: string): string => `simulator.${hostname.toLowerCase().replace(/\.$/, '')}`;

/**
 * The outcome an address of the simulator's domain stands for; null for an address elsewhere. A local part
 * the simulator does not know is delivered, as any mailbox of a domain that accepts everything would be.
 */
export function simulatedOutcome(address: string, domain: string): SimulatedOutcome | null {
  const at = address.lastIndexOf('@');
  if (at < 0 || address.slice(at + 1).toLowerCase() !== domain) return null;
  const local = address.slice(0, at).toLowerCase().split('+')[0]!;
  return OUTCOMES.has(local) ? (local as SimulatedOutcome) : 'delivered';
}
