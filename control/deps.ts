// What a request handler may use: the context, storage and the derived public URL.
import type { CoreDeps } from '../core/deps.js';
import type { Principal } from './principal.js';
import type { Access } from './authorize.js';
import type { WebmailGate } from './webmail/gate.js';
import type { RouteInput, RouteOutput, RouteSpec } from '@svc-mail/sdk';

export interface Deps extends CoreDeps {
  /** SVC_PUBLIC_URL, or http://<bind>:<bound port> when unset. */
  publicUrl(): string;
  /** scrypt cost (log2 N) for new password hashes; LOG_N in production, lower in tests. */
  passwordLogN: number;
}

export interface RequestCtx {
  principal: Principal | null;
  requestId: string;
  ip: string;
  now: Date;
  deps: Deps;
  /** What the route's declared target check granted (null for routes without a target). */
  access: Access | null;
  /** Filled in by handlers whose target the app could not know beforehand (created rows). */
  audit: {
    organizationId?: string | null;
    projectId?: string | null;
    targetId?: string | null;
    actorId?: string | null;
  };
  /** On the webmail's routes: the gate's verdict, with the session of one inbox (control/webmail/gate.ts). */
  webmail?: WebmailGate | null;
  /** Response headers a handler adds (e.g. Idempotent-Replayed). */
  headers: Record<string, string>;
  /** The request's JSON body parsed anew from its octets: the value the route's check passed, as a fresh object. */
  rereadBody(): unknown;
}

export type Handler<R extends RouteSpec> = (input: RouteInput<R>, rc: RequestCtx) => Promise<RouteOutput<R>>;
export type Handlers<T extends Record<string, RouteSpec>> = { [K in keyof T]: Handler<T[K]> };
