//! The tokenizer of a GGUF model, built from the file's own metadata: vocabulary, merges, token
//! types and the pre-tokenizer the file names (`tokenizer.ggml.pre`).
//!
//! Why not candle's `TokenizerFromGguf`: it applies one generic byte-level pre-tokenizer with a
//! prefix space to every model. SmolLM2 splits digits one by one before byte-level BPE and adds
//! no prefix space, so candle's ids differ from the ones the model was trained on (a test pins
//! ours against an independent implementation). The BPE itself is the `tokenizers` crate's.
//!
//! On failure (a SentencePiece model, a pre-tokenizer we do not know, broken metadata) loading
//! stops with an error naming what is unsupported: a guessed tokenizer would feed the model
//! ids it never saw and make its answers meaningless. Encoding or decoding that fails at
//! decision time is a [`TokenizerError`].

use candle_core::quantized::gguf_file::{Content, Value};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

use super::LoadError;

/// Why text could not be turned into ids or back; shows the `tokenizers` crate's message.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("{0}")]
    Encode(tokenizers::Error),
    #[error("{0}")]
    Decode(tokenizers::Error),
}

/// Llama 3's pre-tokenizer split (from its `tokenizer.json`).
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's: Llama 3's with single digits.
const QWEN2_SPLIT: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`).
const CONTROL: i64 = 3;
const USER_DEFINED: i64 = 4;

pub struct GgufTokenizer {
    inner: Tokenizer,
    /// Texts of control and user-defined tokens: inside message contents they are broken up so
    /// a transcript cannot forge a turn boundary.
    special_texts: Vec<String>,
    pub bos: Option<u32>,
    pub eos: u32,
    /// End of a turn, where it differs from `eos` (Llama 3's `<|eot_id|>`).
    pub eot: Option<u32>,
    pub pre_tokenizer: String,
}

fn strings(content: &Content, key: &str) -> Result<Vec<String>, LoadError> {
    let Some(Value::Array(values)) = content.metadata.get(key) else {
        return Err(LoadError::Metadata(format!("`{key}` is missing or not an array")));
    };
    values
        .iter()
        .map(|value| match value {
            Value::String(text) => Ok(text.clone()),
            other => Err(LoadError::Metadata(format!("`{key}` holds a non-string: {other:?}"))),
        })
        .collect()
}

fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::I8(n) => Some(i64::from(*n)),
        Value::U8(n) => Some(i64::from(*n)),
        Value::I16(n) => Some(i64::from(*n)),
        Value::U16(n) => Some(i64::from(*n)),
        Value::I32(n) => Some(i64::from(*n)),
        Value::U32(n) => Some(i64::from(*n)),
        Value::I64(n) => Some(*n),
        Value::U64(n) => i64::try_from(*n).ok(),
        _ => None,
    }
}

fn token_id(content: &Content, key: &str, vocab: usize) -> Result<Option<u32>, LoadError> {
    let Some(value) = content.metadata.get(key) else {
        return Ok(None);
    };
    match integer(value).and_then(|id| u32::try_from(id).ok()) {
        Some(id) if (id as usize) < vocab => Ok(Some(id)),
        _ => Err(LoadError::Metadata(format!("`{key}` is not a token id: {value:?}"))),
    }
}

fn pre_tokenizer(name: &str) -> Result<PreTokenizerWrapper, LoadError> {
    let split = |pattern: &str| -> Result<PreTokenizerWrapper, LoadError> {
        let split = Split::new(SplitPattern::Regex(pattern.to_owned()), SplitDelimiterBehavior::Isolated, false)
            .map_err(|error| LoadError::Metadata(format!("pre-tokenizer `{name}`: {error}")))?;
        Ok(Sequence::new(vec![split.into(), ByteLevel::new(false, true, false).into()]).into())
    };
    match name {
        // GPT-2's own regex inside the byte-level step, with every digit its own piece first.
        "smollm" => Ok(Sequence::new(vec![Digits::new(true).into(), ByteLevel::new(false, true, true).into()]).into()),
        "gpt2" | "gpt-2" | "default" => Ok(ByteLevel::new(false, true, true).into()),
        "llama-bpe" | "llama3" => split(LLAMA3_SPLIT),
        "qwen2" => split(QWEN2_SPLIT),
        other => Err(LoadError::Unsupported(format!(
            "pre-tokenizer `{other}`; supported: smollm, gpt2, default, llama-bpe, qwen2"
        ))),
    }
}

impl GgufTokenizer {
    pub fn from_metadata(content: &Content) -> Result<Self, LoadError> {
        match content.metadata.get("tokenizer.ggml.model") {
            Some(Value::String(model)) if model == "gpt2" => {}
            Some(Value::String(model)) => {
                return Err(LoadError::Unsupported(format!(
                    "tokenizer model `{model}` (only byte-level BPE, `gpt2`, is supported)"
                )));
            }
            _ => return Err(LoadError::Metadata("`tokenizer.ggml.model` is missing".to_owned())),
        }
        let pre_name = match content.metadata.get("tokenizer.ggml.pre") {
            Some(Value::String(name)) => name.clone(),
            _ => "default".to_owned(),
        };
        let tokens = strings(content, "tokenizer.ggml.tokens")?;
        let merges = strings(content, "tokenizer.ggml.merges")?
            .into_iter()
            .enumerate()
            .map(|(index, merge)| match merge.split_once(' ') {
                Some((left, right)) => Ok((left.to_owned(), right.to_owned())),
                None => Err(LoadError::Metadata(format!("merge {index} `{merge}` is not two tokens"))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let types: Vec<i64> = match content.metadata.get("tokenizer.ggml.token_type") {
            Some(Value::Array(values)) => values.iter().map(|value| integer(value).unwrap_or(1)).collect(),
            _ => vec![1; tokens.len()],
        };
        let vocab: Vocab = tokens.iter().enumerate().map(|(id, token)| (token.clone(), id as u32)).collect();
        if vocab.len() != tokens.len() {
            return Err(LoadError::Metadata("the vocabulary holds duplicate tokens".to_owned()));
        }
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|error| LoadError::Metadata(format!("the BPE model does not build: {error}")))?;
        let mut inner = Tokenizer::new(bpe);
        inner.with_pre_tokenizer(Some(pre_tokenizer(&pre_name)?));
        inner.with_decoder(Some(ByteLevelDecoder::default()));
        let mut special_texts = Vec::new();
        let mut control = Vec::new();
        let mut user_defined = Vec::new();
        for (token, kind) in tokens.iter().zip(types.iter().copied().chain(std::iter::repeat(1))) {
            match kind {
                CONTROL => control.push(AddedToken::from(token.clone(), true)),
                USER_DEFINED => user_defined.push(AddedToken::from(token.clone(), false)),
                _ => continue,
            }
            if !token.is_empty() {
                special_texts.push(token.clone());
            }
        }
        inner
            .add_special_tokens(control)
            .map_err(|error| LoadError::Metadata(format!("the control tokens do not register: {error}")))?;
        inner
            .add_tokens(user_defined)
            .map_err(|error| LoadError::Metadata(format!("the user-defined tokens do not register: {error}")))?;
        let eos = token_id(content, "tokenizer.ggml.eos_token_id", tokens.len())?
            .ok_or_else(|| LoadError::Metadata("`tokenizer.ggml.eos_token_id` is missing".to_owned()))?;
        let eot = token_id(content, "tokenizer.ggml.eot_token_id", tokens.len())?.filter(|eot| *eot != eos);
        Ok(GgufTokenizer {
            inner,
            special_texts,
            bos: token_id(content, "tokenizer.ggml.bos_token_id", tokens.len())?,
            eos,
            eot,
            pre_tokenizer: pre_name,
        })
    }

    /// Ids of `text`, where special-token texts become their special tokens (the chat template
    /// writes them; [`Self::neutralise`] has already broken up any inside contents).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        self.inner.encode_fast(text, false).map(|encoding| encoding.get_ids().to_vec()).map_err(TokenizerError::Encode)
    }

    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        self.inner.decode(ids, true).map_err(TokenizerError::Decode)
    }

    /// The text of token `id` (for the chat template's `bos_token` / `eos_token`).
    pub fn token_text(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// Breaks up special-token texts inside a message content (a space after their first
    /// character), so the transcript cannot open or close turns of the chat template.
    pub fn neutralise(&self, content: &str) -> String {
        let mut text = content.to_owned();
        for special in &self.special_texts {
            if text.contains(special.as_str()) {
                let mut characters = special.chars();
                let first = characters.next().map(String::from).unwrap_or_default();
                text = text.replace(special.as_str(), &format!("{first} {}", characters.as_str()));
            }
        }
        text
    }

    /// The tokens that end an answer.
    pub fn stops(&self) -> Vec<u32> {
        std::iter::once(self.eos).chain(self.eot).collect()
    }

    /// The token that closes the assistant's turn.
    pub fn end_of_turn(&self) -> u32 {
        self.eot.unwrap_or(self.eos)
    }
}
