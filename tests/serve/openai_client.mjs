// openai_client.mjs: the official OpenAI client (npm `openai`) against
// hearth serve with Hearth's default model. Every answer is checked
// against a JSON Schema made from the client's own TypeScript types
// (ChatCompletion, ChatCompletionChunk, Model: typescript-json-schema over
// the package's .d.ts), and what the model was asked to write (a tool's
// arguments, a response_format schema) against that schema.
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import Ajv from 'ajv';
import * as TJS from 'typescript-json-schema';
import { assert, startServer, test } from './harness.mjs';

const dir = process.env.NODE_DIR;

// The client's types as JSON Schema: required fields required, nullable
// ones nullable, literal fields their literals; fields it does not know are
// allowed (as the client allows them).
function clientSchemas() {
  const file = path.join(dir, 'shapes.ts');
  fs.writeFileSync(file,
    "import type { ChatCompletion, ChatCompletionChunk } from 'openai/resources/chat/completions';\n" +
    "import type { Model } from 'openai/resources/models';\n" +
    'export interface Shapes { completion: ChatCompletion; chunk: ChatCompletionChunk; model: Model; }\n');
  const program = TJS.getProgramFromFiles([file],
    { strict: true, skipLibCheck: true, esModuleInterop: true, moduleResolution: 'node' }, dir);
  const schema = TJS.generateSchema(program, 'Shapes',
    { required: true, strictNullChecks: true, ignoreErrors: true });
  assert(schema && schema.definitions.ChatCompletion, 'no schema from the client types');
  const ajv = new Ajv({ strict: false, allErrors: true });
  ajv.addSchema(schema, 'shapes');
  const check = (name) => {
    const v = ajv.compile({ $ref: `shapes#/definitions/${name}` });
    return (value) => {
      if (!v(value)) throw new Error(`not a ${name}: ${ajv.errorsText(v.errors)} in ${JSON.stringify(value).slice(0, 400)}`);
    };
  };
  return { completion: check('ChatCompletion'), chunk: check('ChatCompletionChunk'), model: check('Model'), ajv };
}

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather of a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1, maximum: 7 } },
      required: ['city'],
      additionalProperties: false,
    },
  },
};

const person = {
  type: 'object',
  properties: { name: { type: 'string', maxLength: 30 }, age: { type: 'integer', minimum: 0, maximum: 150 } },
  required: ['name', 'age'],
  additionalProperties: false,
};

const t0 = Date.now();
const shapes = clientSchemas();
console.log(`# the client's types as JSON Schema in ${Date.now() - t0} ms`);
const server = await startServer();
const client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: server.token, maxRetries: 0, timeout: 120000 });
const model = 'hearth-tiny.gguf';
const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];

await test('models', async () => {
  const page = await client.models.list();
  assert(page.data.length === 1, 'one model');
  for (const m of page.data) shapes.model(m);
  assert(page.data[0].id === model, `the default model, not ${page.data[0].id}`);
});

await test('chat', async () => {
  const c = await client.chat.completions.create({
    model, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' }],
    max_tokens: 12, temperature: 0,
  });
  shapes.completion(c);
  assert(c.usage.completion_tokens <= 12, 'max_tokens holds');
  assert(['stop', 'length'].includes(c.choices[0].finish_reason), c.choices[0].finish_reason);
});

await test('shapes_bite', async () => {
  // control: the schemas refuse what the client's types refuse
  const ok = { id: 'x', object: 'chat.completion', created: 1, model,
               choices: [{ index: 0, finish_reason: 'stop', logprobs: null,
                           message: { role: 'assistant', content: 'hi', refusal: null } }] };
  shapes.completion(ok);
  const bad = [
    { ...ok, object: 'completion' },
    { ...ok, choices: [{ ...ok.choices[0], message: { role: 'assistant' } }] },
    { ...ok, choices: [{ ...ok.choices[0], finish_reason: 'done' }] },
    { ...ok, created: '1' },
  ];
  for (const b of bad) {
    let refused = false;
    try { shapes.completion(b); } catch (e) { refused = true; }
    assert(refused, `taken: ${JSON.stringify(b).slice(0, 200)}`);
  }
});

await test('chat_stream', async () => {
  const stream = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'Hello' }], stream: true,
    stream_options: { include_usage: true }, max_tokens: 10, temperature: 0,
  });
  let n = 0, finish = null, usage = null, text = '';
  for await (const chunk of stream) {
    shapes.chunk(chunk);
    n++;
    if (chunk.usage) usage = chunk.usage;
    for (const ch of chunk.choices) {
      text += ch.delta.content || '';
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  assert(n >= 3, `${n} chunks`);
  assert(finish === 'length' || finish === 'stop', `finish ${finish}`);
  assert(usage && usage.completion_tokens === 10 || finish === 'stop', 'the usage chunk');
  console.log(`# streamed ${n} chunks: ${JSON.stringify(text.slice(0, 60))}`);
});

await test('chat_stream_helper', async () => {
  // the client's own accumulator of a stream into a completion
  const runner = client.chat.completions.stream({
    model, messages: ask, tools: [weather], tool_choice: 'required', temperature: 0,
  });
  const final = await runner.finalChatCompletion();
  shapes.completion(final);
  const call = final.choices[0].message.tool_calls[0];
  assert(call.function.name === 'get_weather', call.function.name);
  const args = JSON.parse(call.function.arguments);
  assert(shapes.ajv.validate(weather.function.parameters, args), 'streamed arguments hold to the schema');
});

await test('tools', async () => {
  const c = await client.chat.completions.create({ model, messages: ask, tools: [weather], tool_choice: 'required', temperature: 0 });
  shapes.completion(c);
  const choice = c.choices[0];
  assert(choice.finish_reason === 'tool_calls', choice.finish_reason);
  const call = choice.message.tool_calls[0];
  assert(call.type === 'function' && call.id.startsWith('call_'), JSON.stringify(call));
  const args = JSON.parse(call.function.arguments);
  assert(shapes.ajv.validate(weather.function.parameters, args), `arguments ${call.function.arguments}`);
  // the call's result sent back, as a client does
  const next = await client.chat.completions.create({
    model, temperature: 0, max_tokens: 20, tools: [weather],
    messages: [...ask, choice.message, { role: 'tool', tool_call_id: call.id, content: '{"sky": "clear", "c": 21}' }],
  });
  shapes.completion(next);
});

await test('json_schema', async () => {
  const c = await client.chat.completions.create({
    model, temperature: 0.7, seed: 5,
    messages: [{ role: 'user', content: 'Describe Bob, who is 30.' }],
    response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: person } },
  });
  shapes.completion(c);
  const value = JSON.parse(c.choices[0].message.content);
  assert(shapes.ajv.validate(person, value), `content ${c.choices[0].message.content}`);
  const parsed = await client.chat.completions.parse({
    model, temperature: 0, messages: [{ role: 'user', content: 'Describe Alice.' }],
    response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: person } },
  });
  assert(shapes.ajv.validate(person, parsed.choices[0].message.parsed), 'the client parsed it');
});

await test('errors', async () => {
  const bad = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'wrong', maxRetries: 0 });
  try {
    await bad.models.list();
    assert(false, 'a wrong key was taken');
  } catch (e) {
    assert(e instanceof OpenAI.AuthenticationError && e.status === 401, String(e));
  }
  try {
    await client.chat.completions.create({ model, messages: [] });
    assert(false, 'no messages was taken');
  } catch (e) {
    assert(e instanceof OpenAI.BadRequestError && e.status === 400, String(e));
    assert(e.param === 'messages' && /messages/.test(e.message), `${e.param}: ${e.message}`);
  }
});

await server.stop();
