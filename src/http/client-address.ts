/**
 * Who the client is when proxies stand in front: the peer address, or an entry of
 * X-Forwarded-For that a trusted proxy wrote. Only entries the trusted proxies appended are
 * believed (counted from the right); anything a client writes itself is never trusted, and entries
 * that are not IP addresses are ignored.
 */
import { BlockList, isIP } from 'node:net';

/** How far to trust X-Forwarded-For: not at all, a number of proxy hops, or a set of proxy addresses. */
export type TrustProxy = { kind: 'none' } | { kind: 'hops'; hops: number } | { kind: 'proxies'; proxies: BlockList };

/** The config value (`false`, `true` = one hop, a hop count, or proxy addresses/CIDRs) as a TrustProxy. */
export function trustProxyFrom(value: boolean | number | readonly string[] | undefined): TrustProxy {
  if (value === undefined || value === false || value === 0) return { kind: 'none' };
  if (value === true) return { kind: 'hops', hops: 1 };
  if (typeof value === 'number') return { kind: 'hops', hops: value };
  const proxies = new BlockList();
  for (const entry of value) {
    const [address = '', prefix] = entry.split('/');
    const family = isIP(address);
    if (family === 0) throw new Error(`trust_proxy: "${entry}" is not an IP address or CIDR`);
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (prefix === undefined) proxies.addAddress(address, type);
    else proxies.addSubnet(address, Number(prefix), type);
  }
  return { kind: 'proxies', proxies };
}

function typeOf(address: string): 'ipv4' | 'ipv6' {
  return isIP(address) === 6 ? 'ipv6' : 'ipv4';
}

/** The client's address for a request from `peer` carrying `forwardedFor`. */
export function clientAddressFrom(peer: string, forwardedFor: string | undefined, trust: TrustProxy): string {
  if (trust.kind === 'none' || !forwardedFor) return peer;
  // Nearest hop first: the peer, then X-Forwarded-For from the right (each proxy appends).
  const chain = [
    peer,
    ...forwardedFor
      .split(',')
      .map((entry) => entry.trim())
      .filter((entry) => isIP(entry) !== 0)
      .reverse(),
  ];
  if (trust.kind === 'hops') return chain[Math.min(trust.hops, chain.length - 1)] ?? peer;
  let index = 0;
  while (index < chain.length - 1 && trust.proxies.check(chain[index] ?? '', typeOf(chain[index] ?? ''))) index += 1;
  return chain[index] ?? peer;
}
