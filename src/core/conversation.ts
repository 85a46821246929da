/**
 * Stage 1, the conversation: the system text, the stored turns of the session (owned by the
 * caller), the given history, then the new user message, in that order.
 */
import type { ProviderMessage } from '../providers/types.js';
import type { ChatDependencies, ChatJob } from './chat-job.js';

/** The messages the model reads, and how many came from storage and from the request. */
export interface Conversation {
  messages: ProviderMessage[];
  storedTurns: number;
  givenTurns: number;
}

/** True when the request brings earlier turns (a session or a history), so the stage is reported. */
export function hasEarlierTurns(job: ChatJob): boolean {
  if (job.given) return job.given.messages.length > 1;
  return job.request.session_id !== undefined || (job.request.history?.length ?? 0) > 0;
}

/** The conversation from the stored turns given (none without a session). */
export function conversationOf(
  job: ChatJob,
  stored: ReadonlyArray<{ role: 'user' | 'assistant' | 'tool'; content: string }>,
): Conversation {
  const { request, given } = job;
  if (given) return { messages: given.messages, storedTurns: 0, givenTurns: given.messages.length - 1 };
  const messages: ProviderMessage[] = [];
  if (request.system) messages.push({ role: 'system', content: request.system });
  // Stored tool results belong to the /v1 conversations that sent them; /api reads the prose turns.
  for (const turn of stored) if (turn.role !== 'tool') messages.push({ role: turn.role, content: turn.content });
  const history = request.history ?? [];
  for (const turn of history) messages.push(turn);
  messages.push({ role: 'user', content: request.message });
  return { messages, storedTurns: stored.length, givenTurns: history.length };
}

/** Builds the conversation for a job, reading the session's newest turns when it names one. */
export async function buildConversation(job: ChatJob, deps: Pick<ChatDependencies, 'sessions' | 'sessionMaxTurns'>): Promise<Conversation> {
  const sessionId = job.request.session_id;
  // A given conversation is whole: a session only records its new turn.
  const session =
    sessionId === undefined || job.given ? undefined : await deps.sessions.get(job.caller.id, sessionId, deps.sessionMaxTurns);
  return conversationOf(job, session?.messages ?? []);
}
