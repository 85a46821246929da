/**
 * Stage 4, persisting: the user message and the reply are appended to the caller's session. A
 * reply cut short (client gone, upstream failed) is stored too, marked incomplete.
 */
import type { SessionMessage } from '../store/types.js';
import type { ChatDependencies, ChatJob } from './chat-job.js';

/** Appends the turn pair to the job's session; does nothing without a session. */
export async function persistTurn(
  job: ChatJob,
  deps: Pick<ChatDependencies, 'sessions'>,
  userTurn: SessionMessage,
  answer: string,
  options: { incomplete: boolean },
): Promise<void> {
  const sessionId = job.request.session_id;
  if (sessionId === undefined) return;
  const reply: SessionMessage = { role: 'assistant', content: answer, timestamp: new Date().toISOString() };
  if (options.incomplete) reply.incomplete = true;
  await deps.sessions.append(job.caller.id, sessionId, [userTurn, reply]);
}
