// The mailbox simulator's side of the MTA (docs/api.md §4.11, "Simulator"; mail/simulator.ts): an attempt to a
// simulator address is answered here, as the real receiver would answer, and nothing is dialled.
import { SmtpReply } from '../../mail/smtp-reply.js';
import { simulatedOutcome, type SimulatedOutcome } from '../../mail/simulator.js';
import type { SendResult, Transport } from './pool.js';

const HOST = 'simulator';
const TRANSPORT: Transport = {
  host: HOST,
  ip: null,
  tls: false,
  tlsVersion: null,
  tlsCipher: null,
  tlsVerified: 'none',
  tlsPolicy: 'none',
};

// The replies a real receiver gives for each outcome (RFC 3463 enhanced codes).
const BOUNCE = new SmtpReply(550, '5.1.1', 'simulated bounce: the mailbox does not exist');
const DEFER = new SmtpReply(451, '4.2.0', 'simulated deferral: the mailbox is temporarily unavailable');

export interface Simulated {
  outcome: SimulatedOutcome;
  result: SendResult;
}

/** The answer to an attempt for `rcpt`, or null when it is not a simulator address. */
export function simulate(rcpt: string, domain: string): Simulated | null {
  const outcome = simulatedOutcome(rcpt, domain);
  if (!outcome) return null;
  const result: SendResult =
    outcome === 'bounced'
      ? { kind: 'reply', host: HOST, reply: BOUNCE, transport: TRANSPORT }
      : outcome === 'deferred'
        ? { kind: 'reply', host: HOST, reply: DEFER, transport: TRANSPORT }
        : { kind: 'accepted', host: HOST, reply: '250 2.0.0 simulated delivery', tls: false, transport: TRANSPORT };
  return { outcome, result };
}
