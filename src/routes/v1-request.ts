/**
 * The OpenAI Chat Completions request, validated once at the edge and turned into a core job's
 * parts: the whole conversation as given, the /v1-only generation options, and a ChatRequest for
 * the shared stages (the last user text is the query for retrieval and search). Unknown fields
 * are ignored at every level (clients send many); known fields with the wrong type are refused.
 */
import * as v from 'valibot';
import type { GivenConversation } from '../core/chat-job.js';
import { type ChatRequest, chatFields } from '../core/chat-request.js';
import { isoTime } from '../domain/iso-time.js';
import { ApiError } from '../errors.js';
import type { GenerationOptions, ImageInput, ProviderMessage, ToolChoice } from '../providers/types.js';
import type { SessionMessage } from '../store/types.js';
import { parseOrThrow } from '../validation.js';

const Text = v.string('must be a string');
const TextPart = v.object({ type: v.literal('text'), text: Text });
const ImagePart = v.object({
  type: v.literal('image_url'),
  image_url: v.union(
    [
      v.object({
        url: v.pipe(Text, v.regex(/^(https?:|data:image\/)/, 'must be an http(s) URL or a data:image/… URL')),
        detail: v.nullish(v.picklist(['auto', 'low', 'high'])),
      }),
    ],
    'must be {url, detail?}',
  ),
});
const RefusalPart = v.object({ type: v.literal('refusal'), refusal: Text });

const partTypes = (allowed: string) => `content parts here must be of type ${allowed}`;
const TextContent = v.union(
  [Text, v.array(v.variant('type', [TextPart], partTypes('"text"')))],
  'must be a string or an array of text parts',
);
const UserContent = v.union(
  [Text, v.array(v.variant('type', [TextPart, ImagePart], partTypes('"text" or "image_url"')))],
  'must be a string or an array of text and image_url parts',
);
const AssistantContent = v.nullish(
  v.union(
    [Text, v.array(v.variant('type', [TextPart, RefusalPart], partTypes('"text" or "refusal"')))],
    'must be a string, null or an array of text parts',
  ),
);

const ToolCallSchema = v.object({
  id: Text,
  type: v.optional(v.literal('function')),
  function: v.object({ name: Text, arguments: v.optional(Text, '') }),
});

const MessageSchema = v.variant(
  'role',
  [
    v.object({ role: v.picklist(['system', 'developer']), content: TextContent }),
    v.object({ role: v.literal('user'), content: UserContent }),
    v.object({ role: v.literal('assistant'), content: AssistantContent, tool_calls: v.nullish(v.array(ToolCallSchema)) }),
    v.object({ role: v.literal('tool'), content: TextContent, tool_call_id: Text }),
  ],
  'must have a role of "system", "developer", "user", "assistant" or "tool"',
);

const Tokens = v.nullish(v.pipe(v.number(), v.integer('must be an integer'), v.minValue(1, 'must be at least 1')));
const Probability = (max: number) =>
  v.nullish(v.pipe(v.number('must be a number'), v.minValue(0, 'must be at least 0'), v.maxValue(max, `must be at most ${max}`)));

const ToolSchema = v.object({
  type: v.literal('function'),
  function: v.object({
    name: v.pipe(Text, v.regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1-64 characters of A-Z, a-z, 0-9, "_" or "-"')),
    description: v.nullish(Text),
    parameters: v.nullish(v.record(v.string(), v.unknown())),
    strict: v.nullish(v.boolean()),
  }),
});

const ResponseFormatSchema = v.variant(
  'type',
  [
    v.object({ type: v.picklist(['text', 'json_object']) }),
    v.object({
      type: v.literal('json_schema'),
      json_schema: v.object({ name: Text, schema: v.nullish(v.record(v.string(), v.unknown())), strict: v.nullish(v.boolean()) }),
    }),
  ],
  'must have a type of "text", "json_object" or "json_schema"',
);

export const CompletionRequestSchema = v.object({
  model: v.nullish(v.pipe(Text, v.minLength(1, 'must not be empty'))),
  messages: v.pipe(v.array(MessageSchema, 'must be an array of messages'), v.minLength(1, 'must have at least one message')),
  stream: v.nullish(v.boolean()),
  stream_options: v.nullish(v.object({ include_usage: v.nullish(v.boolean()) })),
  max_tokens: Tokens,
  max_completion_tokens: Tokens,
  temperature: Probability(2),
  top_p: Probability(1),
  stop: v.nullish(
    v.union([Text, v.pipe(v.array(Text), v.maxLength(16, 'must have at most 16 items'))], 'must be a string or an array of strings'),
  ),
  seed: v.nullish(v.pipe(v.number(), v.integer('must be an integer'))),
  n: v.nullish(v.pipe(v.number(), v.value(1, 'only 1 is supported: Colloquy generates one choice per request'))),
  user: v.nullish(Text),
  response_format: v.nullish(ResponseFormatSchema),
  reasoning_effort: v.nullish(v.picklist(['none', 'minimal', 'low', 'medium', 'high', 'xhigh'])),
  tools: v.nullish(v.pipe(v.array(ToolSchema), v.maxLength(128, 'must have at most 128 tools'))),
  tool_choice: v.nullish(
    v.union(
      [v.picklist(['none', 'auto', 'required']), v.object({ type: v.literal('function'), function: v.object({ name: Text }) })],
      'must be "none", "auto", "required" or {type: "function", function: {name}}',
    ),
  ),
  parallel_tool_calls: v.nullish(v.boolean()),
  // Colloquy's own features, sent through the clients' "extra body" options.
  session_id: chatFields.session_id,
  rag: chatFields.rag,
  web_search: chatFields.web_search,
  language: chatFields.language,
});

type CompletionRequest = v.InferOutput<typeof CompletionRequestSchema>;
type Message = CompletionRequest['messages'][number];

/** A validated /v1/chat/completions request, in the core's terms. */
export interface ParsedCompletion {
  request: ChatRequest;
  given: GivenConversation;
  options: GenerationOptions;
  stream: boolean;
  includeUsage: boolean;
  /** Images sent in user messages (checked against the model's `vision` once it is resolved). */
  images: ImageInput[];
}

function textOf(content: string | ReadonlyArray<{ type: string; text?: string; refusal?: string }> | null | undefined): string {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  return content
    .map((part) => part.text ?? part.refusal ?? '')
    .filter((text) => text.length > 0)
    .join('\n');
}

function providerMessage(message: Message): ProviderMessage {
  switch (message.role) {
    case 'system':
    case 'developer':
      return { role: 'system', content: textOf(message.content) };
    case 'user': {
      if (typeof message.content === 'string') return { role: 'user', content: message.content };
      const images: ImageInput[] = [];
      for (const part of message.content) {
        if (part.type === 'image_url')
          images.push({ url: part.image_url.url, ...(part.image_url.detail ? { detail: part.image_url.detail } : {}) });
      }
      return {
        role: 'user',
        content: textOf(message.content.filter((part) => part.type === 'text')),
        ...(images.length > 0 ? { images } : {}),
      };
    }
    case 'assistant': {
      const toolCalls = (message.tool_calls ?? []).map((call) => ({
        id: call.id,
        name: call.function.name,
        arguments: call.function.arguments,
      }));
      return { role: 'assistant', content: textOf(message.content), ...(toolCalls.length > 0 ? { toolCalls } : {}) };
    }
    case 'tool':
      return { role: 'tool', content: textOf(message.content), toolCallId: message.tool_call_id };
  }
}

/** What a session records of this request: the messages after the last assistant turn (user messages and tool results). */
function newTurn(messages: readonly ProviderMessage[]): SessionMessage[] {
  const timestamp = isoTime();
  const turn: SessionMessage[] = [];
  for (let at = messages.length - 1; at >= 0; at--) {
    const message = messages[at];
    if (!message || message.role === 'assistant') break;
    if (message.role === 'user') turn.unshift({ role: 'user', content: message.content, timestamp });
    else if (message.role === 'tool') turn.unshift({ role: 'tool', content: message.content, tool_call_id: message.toolCallId, timestamp });
  }
  return turn;
}

function toolChoiceOf(choice: CompletionRequest['tool_choice']): ToolChoice | undefined {
  if (choice === null || choice === undefined) return undefined;
  return typeof choice === 'string' ? choice : { name: choice.function.name };
}

function generationOptions(body: CompletionRequest): GenerationOptions {
  const options: GenerationOptions = {};
  if (body.top_p != null) options.topP = body.top_p;
  if (body.stop != null) options.stop = typeof body.stop === 'string' ? [body.stop] : body.stop;
  if (body.seed != null) options.seed = body.seed;
  if (body.user != null) options.user = body.user;
  if (body.reasoning_effort != null) options.reasoningEffort = body.reasoning_effort;
  const format = body.response_format;
  if (format) {
    options.responseFormat =
      format.type === 'json_schema'
        ? {
            type: 'json_schema',
            name: format.json_schema.name,
            schema: format.json_schema.schema ?? undefined,
            strict: format.json_schema.strict ?? undefined,
          }
        : { type: format.type };
  }
  if (body.tools && body.tools.length > 0) {
    options.tools = body.tools.map((tool) => ({
      name: tool.function.name,
      ...(tool.function.description != null ? { description: tool.function.description } : {}),
      ...(tool.function.parameters != null ? { parameters: tool.function.parameters } : {}),
      ...(tool.function.strict != null ? { strict: tool.function.strict } : {}),
    }));
    const choice = toolChoiceOf(body.tool_choice);
    if (choice !== undefined) options.toolChoice = choice;
    if (body.parallel_tool_calls != null) options.parallelToolCalls = body.parallel_tool_calls;
  }
  return options;
}

/** Validates a parsed /v1/chat/completions body; throws invalid_request naming each failing field. */
export function parseCompletionRequest(json: unknown): ParsedCompletion {
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    throw new ApiError('invalid_request', 'The body must be a JSON object.', {
      details: [{ path: '(body)', message: 'must be an object' }],
    });
  }
  const body = parseOrThrow(CompletionRequestSchema, json, 'The chat completion request is not valid.');
  const messages = body.messages.map(providerMessage);
  const lastUser = messages.findLast((message) => message.role === 'user');
  const query = lastUser?.content.trim() ?? '';
  if ((body.rag || body.web_search) && query.length === 0) {
    throw new ApiError('invalid_request', 'rag and web_search search for the last user message, and there is none with text.', {
      details: [{ path: 'messages', message: 'must contain a user message with text when rag or web_search is set' }],
    });
  }
  const choice = toolChoiceOf(body.tool_choice);
  if (typeof choice === 'object' && !body.tools?.some((tool) => tool.function.name === choice.name)) {
    throw new ApiError('invalid_request', `tool_choice names "${choice.name}", which is not one of the tools.`, {
      details: [{ path: 'tool_choice.function.name', message: 'must name one of the tools' }],
    });
  }
  const effort = body.reasoning_effort;
  const maxTokens = body.max_completion_tokens ?? body.max_tokens;
  const request: ChatRequest = {
    message: query,
    ...(body.model != null ? { model: body.model } : {}),
    ...(body.session_id !== undefined ? { session_id: body.session_id } : {}),
    ...(body.rag !== undefined ? { rag: body.rag } : {}),
    ...(body.web_search !== undefined ? { web_search: body.web_search } : {}),
    ...(body.language !== undefined ? { language: body.language } : {}),
    ...(body.temperature != null ? { temperature: body.temperature } : {}),
    ...(maxTokens != null ? { max_tokens: maxTokens } : {}),
    deep_thinking: effort != null && effort !== 'none' && effort !== 'minimal',
  };
  return {
    request,
    // Only a session records the new turn: without one it is not built.
    given: { messages, turn: body.session_id !== undefined ? newTurn(messages) : [] },
    options: generationOptions(body),
    stream: body.stream === true,
    includeUsage: body.stream_options?.include_usage === true,
    images: messages.flatMap((message) => (message.role === 'user' ? (message.images ?? []) : [])),
  };
}
